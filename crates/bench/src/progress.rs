//! A progress bar (indicatif) that the benchmarks advance by steps; hidden in tests, when
//! stdout is not a terminal, or with `--quiet` (the caller decides).

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Progress of a benchmark, counted in steps (one spec through one phase, one file copied…).
#[derive(Debug, Clone)]
pub struct Progress {
    bar: ProgressBar,
}

impl Progress {
    /// A bar drawn on stderr when `visible`, else a hidden one.
    pub fn new(visible: bool) -> Progress {
        let bar = ProgressBar::with_draw_target(
            Some(0),
            if visible {
                ProgressDrawTarget::stderr()
            } else {
                ProgressDrawTarget::hidden()
            },
        );
        if let Ok(style) =
            ProgressStyle::with_template("{elapsed_precise:>8} [{bar:32}] {pos}/{len} {msg}")
        {
            bar.set_style(style.progress_chars("=> "));
        }
        Progress { bar }
    }

    /// A hidden bar.
    pub fn hidden() -> Progress {
        Progress::new(false)
    }

    /// Add `steps` to the total.
    pub fn add_steps(&self, steps: u64) {
        self.bar.inc_length(steps);
    }

    /// Say what is being done now.
    pub fn step(&self, message: impl Into<String>) {
        self.bar.set_message(message.into());
    }

    /// One step done.
    pub fn done(&self) {
        self.bar.inc(1);
    }

    /// Print a line above the bar (or to stderr when hidden).
    pub fn note(&self, line: impl AsRef<str>) {
        if self.bar.is_hidden() {
            eprintln!("{}", line.as_ref());
        } else {
            self.bar.println(line.as_ref());
        }
    }

    /// Remove the bar.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}
