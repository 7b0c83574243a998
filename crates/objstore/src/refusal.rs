//! What an upload's failure says about the bucket: not reachable (try again, and give up after
//! the configured wait), or it answers and refuses the writes — over quota, out of space,
//! read-only, writes denied — which a filesystem must report as ENOSPC or EDQUOT at once,
//! not as a wait that ends in EIO.
//!
//! The S3 answers that say so outright are taken at their word: 507 Insufficient Storage, and
//! the codes `QuotaExceeded`, `InsufficientStorage`, `XMinioStorageFull`, a 403 to a PUT.
//! Some servers answer a bucket over quota with a plain error (SeaweedFS makes the bucket
//! read-only and answers 500 `InternalError`), so any error the bucket keeps answering to
//! uploads for [`REFUSED_AFTER`] counts as a refusal too. A failure with no answer (no
//! connection, a timeout) never does.
//!
//! Mirrors nothing in the kernel: a block device under btrfs is full or is not; a bucket may
//! say so in several ways, or not at all.

use std::time::{Duration, Instant};

/// An error the bucket keeps answering to uploads for this long is a refusal.
pub(crate) const REFUSED_AFTER: Duration = Duration::from_secs(5);

/// One upload failure, judged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// No answer from the bucket (connection, timeout): it may come back.
    Unreachable,
    /// The bucket answered with an error: a refusal if it keeps answering so.
    Answered { errno: i32 },
    /// The bucket refuses writes, and says so.
    Refused { errno: i32 },
}

/// Judge an upload's failure from the error's text (object_store does not export the type
/// that holds the HTTP status; its text always names it).
pub(crate) fn judge(e: &object_store::Error) -> Verdict {
    let text = e.to_string();
    let status = status_of(&text);
    // The answer, not the request: the object's path may hold any word.
    let answer = text.rsplit(" - ").next().unwrap_or(&text);
    let lower = answer.to_ascii_lowercase();
    let errno = if lower.contains("quota") {
        libc::EDQUOT
    } else {
        libc::ENOSPC
    };
    let says_full = ["insufficientstorage", "storagefull", "quotaexceeded"]
        .iter()
        .any(|c| lower.contains(c));
    match (status, e) {
        (_, object_store::Error::PermissionDenied { .. }) => Verdict::Refused { errno },
        (Some(507), _) => Verdict::Refused { errno },
        (Some(_), _) if says_full => Verdict::Refused { errno },
        (Some(_), _) => Verdict::Answered { errno },
        (None, _) => Verdict::Unreachable,
    }
}

/// The HTTP status an object_store error's text names, if the server answered.
fn status_of(text: &str) -> Option<u16> {
    // The request before it is a URL (no spaces): the first such phrase is the answer's.
    if let Some(rest) = text.split("Server returned non-2xx status code: ").nth(1) {
        return rest.get(..3)?.parse().ok();
    }
    // "Server returned error response: BODY" (an error in a 200's body): an answer.
    text.contains("Server returned error response")
        .then_some(200)
}

/// The refusals seen since the last upload that went in.
#[derive(Debug, Default)]
pub(crate) struct Refusals {
    /// When the bucket first answered an upload with an error, since the last success.
    answering_since: Option<Instant>,
    /// The bucket refuses writes: (errno, its last answer, when it gave it).
    pub refusing: Option<(i32, String, Instant)>,
}

impl Refusals {
    /// An upload failed with `verdict`; `answer` is the error's text.
    pub(crate) fn failed(&mut self, verdict: Verdict, answer: &str, now: Instant) {
        match verdict {
            Verdict::Unreachable => self.answering_since = None,
            Verdict::Answered { errno } => {
                let since = *self.answering_since.get_or_insert(now);
                if now.duration_since(since) >= REFUSED_AFTER {
                    self.refusing = Some((errno, answer.to_string(), now));
                }
            }
            Verdict::Refused { errno } => {
                self.answering_since.get_or_insert(now);
                self.refusing = Some((errno, answer.to_string(), now));
            }
        }
    }

    /// An upload went in: the bucket takes writes again.
    pub(crate) fn succeeded(&mut self) {
        *self = Refusals::default();
    }

    /// The refusal a wait that began at `since` must report: one the bucket answered since
    /// (an older one may be out of date — the bucket may take writes again — so a wait
    /// lets the uploads, retried every 2 s at most, answer again first).
    pub(crate) fn since(&self, since: Instant) -> Option<(i32, &str)> {
        match &self.refusing {
            Some((errno, answer, at)) if *at >= since => Some((*errno, answer)),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn generic(text: &str) -> object_store::Error {
        object_store::Error::Generic {
            store: "S3",
            source: text.to_string().into(),
        }
    }

    #[test]
    fn answers_are_judged_by_their_status_and_code() {
        let full = generic("Error performing PUT http://x/b/o in 3ms - Server returned non-2xx status code: 507 Insufficient Storage: ");
        assert_eq!(
            judge(&full),
            Verdict::Refused {
                errno: libc::ENOSPC
            }
        );
        let quota = generic("Error performing PUT http://x/b/o in 1ms - Server returned non-2xx status code: 400 Bad Request: <Code>QuotaExceeded</Code>");
        assert_eq!(
            judge(&quota),
            Verdict::Refused {
                errno: libc::EDQUOT
            }
        );
        let internal = generic("Error performing PUT http://x/b/quota/s1 in 1ms - Server returned non-2xx status code: 500 Internal Server Error: <Code>InternalError</Code>");
        assert_eq!(
            judge(&internal),
            Verdict::Answered {
                errno: libc::ENOSPC
            }
        );
        let gone =
            generic("Error performing PUT http://x/b/o in 5s - HTTP error: error sending request");
        assert_eq!(judge(&gone), Verdict::Unreachable);
        let denied = object_store::Error::PermissionDenied {
            path: "o".into(),
            source: "403 Forbidden: AccessDenied".to_string().into(),
        };
        assert_eq!(
            judge(&denied),
            Verdict::Refused {
                errno: libc::ENOSPC
            }
        );
    }

    proptest::proptest! {
        /// Any text an error may carry is judged without a panic, and only a text that names
        /// a status is an answer.
        #[test]
        fn any_error_text_is_judged(text in ".{0,200}", status in 100u16..600) {
            let v = judge(&generic(&text));
            if !text.contains("Server returned") {
                proptest::prop_assert_eq!(v, Verdict::Unreachable);
            }
            let answered = format!("{text} - Server returned non-2xx status code: {status} X: {text}");
            proptest::prop_assert_ne!(judge(&generic(&answered)), Verdict::Unreachable);
        }
    }

    #[test]
    fn an_error_answered_for_long_enough_is_a_refusal_until_a_success() {
        let mut r = Refusals::default();
        let t = Instant::now();
        let answered = Verdict::Answered {
            errno: libc::ENOSPC,
        };
        r.failed(answered.clone(), "500", t);
        r.failed(answered.clone(), "500", t + Duration::from_secs(2));
        assert_eq!(r.refusing, None);
        // Unreachable in between starts the count again.
        r.failed(Verdict::Unreachable, "gone", t + Duration::from_secs(3));
        r.failed(answered.clone(), "500", t + Duration::from_secs(4));
        r.failed(answered.clone(), "500", t + Duration::from_secs(8));
        assert_eq!(r.refusing, None);
        let at = t + Duration::from_secs(9);
        r.failed(answered, "500 again", at);
        assert_eq!(r.since(t), Some((libc::ENOSPC, "500 again")));
        assert_eq!(r.since(at), Some((libc::ENOSPC, "500 again")));
        assert_eq!(r.since(at + Duration::from_secs(1)), None, "too old");
        r.succeeded();
        assert_eq!(r.since(t), None);
        r.failed(
            Verdict::Refused {
                errno: libc::EDQUOT,
            },
            "quota",
            t,
        );
        assert_eq!(r.since(t), Some((libc::EDQUOT, "quota")));
    }
}
