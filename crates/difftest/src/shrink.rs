//! Shrinking a failing sequence: delta debugging (Zeller's ddmin) over the operations, then
//! one at a time, keeping every cut after which the sequence still fails.

use crate::op::Op;

/// The shortest sequence found that `fails` says still fails, trying at most `budget`
/// replays. `ops` must fail.
pub fn shrink(ops: &[Op], budget: usize, mut fails: impl FnMut(&[Op]) -> bool) -> Vec<Op> {
    let mut cur = ops.to_vec();
    let mut tries = 0usize;
    let mut n = 2usize;
    while cur.len() >= 2 && tries < budget {
        let chunk = cur.len().div_ceil(n);
        let mut cut = false;
        for start in (0..cur.len()).step_by(chunk) {
            if tries >= budget {
                break;
            }
            let end = (start + chunk).min(cur.len());
            let rest: Vec<Op> = cur[..start].iter().chain(&cur[end..]).cloned().collect();
            tries += 1;
            if !rest.is_empty() && fails(&rest) {
                cur = rest;
                n = n.saturating_sub(1).max(2);
                cut = true;
                break;
            }
        }
        if !cut {
            if n >= cur.len() {
                break;
            }
            n = (n * 2).min(cur.len());
        }
    }
    // One at a time, from the end: what ddmin's chunks missed.
    let mut k = cur.len();
    while k > 0 && tries < budget && cur.len() > 1 {
        k -= 1;
        let mut rest = cur.clone();
        rest.remove(k);
        tries += 1;
        if fails(&rest) {
            cur = rest;
        }
    }
    cur
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A failure that needs two particular operations in order shrinks to exactly them.
    #[test]
    fn shrinks_to_the_two_that_matter() {
        let ops: Vec<Op> = (0..40).map(|i| Op::Rmdir { p: format!("n{i}") }).collect();
        let needs = |s: &[Op]| {
            let at = |name: &str| s.iter().position(|o| *o == Op::Rmdir { p: name.into() });
            matches!((at("n7"), at("n31")), (Some(a), Some(b)) if a < b)
        };
        let small = shrink(&ops, 1000, needs);
        assert_eq!(
            small,
            vec![Op::Rmdir { p: "n7".into() }, Op::Rmdir { p: "n31".into() }]
        );
    }
}
