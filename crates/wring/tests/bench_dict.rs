//! `wring bench dict` through its library function, mounting with this binary: a tree of a
//! few hundred small files (made here, sharing a preamble as headers do) at one level must
//! give its row, with a dictionary trained (`dict_train=256K`) and fewer bytes stored with it
//! than without (no timing assertions).

use std::path::PathBuf;

use wring_bench::dict::{self, DictConfig};
use wring_bench::fs::Launcher;
use wring_testing::require_root;

#[test]
fn bench_dict_small_tree() {
    if !require_root("bench_dict_small_tree") {
        return;
    }
    let work = PathBuf::from(format!("/tmp/wring-bench-dict-{}", std::process::id()));
    let src = PathBuf::from(format!("/tmp/wring-bench-dict-src-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&src);
    std::fs::create_dir_all(&src).unwrap();
    for i in 0..1500u32 {
        let mut s = String::from(
            "/* SPDX-License-Identifier: GPL-2.0 */\n/* A header of the bench test: every file \
             starts with this preamble and goes on with definitions of its own. */\n\
             #pragma once\n#include <linux/types.h>\n\n",
        );
        for j in 0..(20 + i % 60) {
            s += &format!(
                "#define BENCH_{i}_{j} (1U << {}) /* {} */\n",
                (i * 7 + j) % 31,
                ["flag", "mask", "shift"][(j % 3) as usize]
            );
        }
        std::fs::write(src.join(format!("h{i}.h")), s).unwrap();
    }
    let cfg = DictConfig {
        sources: vec![src.clone()],
        small: 16 << 10,
        whole: Vec::new(),
        levels: vec![3],
        wring_options: "dict_train=256K".into(),
        launcher: Launcher::Cli(env!("CARGO_BIN_EXE_wring").into()),
        work: work.clone(),
    };
    let report = dict::run(&cfg);
    let _ = std::fs::remove_dir_all(&work);
    let _ = std::fs::remove_dir_all(&src);
    let report = report.unwrap();
    let [row] = report.rows.as_slice() else {
        panic!("{} rows", report.rows.len());
    };
    assert_eq!(row.files, 1500);
    assert!(row.dicts >= 1, "no dictionary was trained: {row:?}");
    assert!(
        row.stored[2] < row.stored[1],
        "dict=auto stored no less than dict=off: {row:?}"
    );
    assert!(row.stored.iter().all(|&b| b > 0), "{row:?}");
    let table = report.markdown();
    assert!(table.contains("| zstd:3 |"), "{table}");
    assert!(report.json().unwrap().contains("\"background_s\""));
}
