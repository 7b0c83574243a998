//! POSIX ACLs: the `system.posix_acl_access` and `system.posix_acl_default` attributes, in the
//! kernel's xattr format, and the rules that tie them to the mode.
//!
//! Mirrors fs/posix_acl.c (posix_acl_valid, posix_acl_equiv_mode, posix_acl_create_masq,
//! posix_acl_chmod_masq) for a FUSE server that negotiated FUSE_POSIX_ACL: the kernel checks
//! permissions against the ACLs itself, and leaves the filesystem to keep mode and ACL in step
//! (on setfacl, chmod and create, where a directory's default ACL is inherited). Differs in
//! nothing visible; the ids are stored as the kernel sends them (its initial user namespace).

use crate::error::{errno, FsError};

/// The access ACL attribute.
pub const ACCESS: &[u8] = b"system.posix_acl_access";
/// The default ACL attribute (directories).
pub const DEFAULT: &[u8] = b"system.posix_acl_default";

/// POSIX_ACL_XATTR_VERSION.
const VERSION: u32 = 2;
const USER_OBJ: u16 = 0x01;
const USER: u16 = 0x02;
const GROUP_OBJ: u16 = 0x04;
const GROUP: u16 = 0x08;
const MASK: u16 = 0x10;
const OTHER: u16 = 0x20;
/// Entries beyond this are refused (the kernel's xattr size limit allows about 8 K).
const MAX_ENTRIES: usize = 8192;

/// One entry: tag, permission bits (rwx), and the user or group id for named entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    tag: u16,
    perm: u16,
    id: u32,
}

/// A parsed, valid ACL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Acl {
    entries: Vec<Entry>,
}

impl Acl {
    /// Parse and validate the xattr form (EINVAL when malformed, as the kernel answers).
    pub fn parse(b: &[u8]) -> Result<Acl, FsError> {
        let bad = || errno(libc::EINVAL);
        let (head, body) = b.split_at_checked(4).ok_or_else(bad)?;
        if u32::from_le_bytes(head.try_into().map_err(|_| bad())?) != VERSION
            || body.len() % 8 != 0
            || body.len() / 8 > MAX_ENTRIES
        {
            return Err(bad());
        }
        let entries = body
            .chunks_exact(8)
            .map(|c| Entry {
                tag: u16::from_le_bytes([c[0], c[1]]),
                perm: u16::from_le_bytes([c[2], c[3]]),
                id: u32::from_le_bytes([c[4], c[5], c[6], c[7]]),
            })
            .collect();
        let acl = Acl { entries };
        acl.valid().then_some(acl).ok_or_else(bad)
    }

    /// posix_acl_valid(): entries in tag order; one owner, owning group and other entry; a
    /// mask when there are named entries; permissions within rwx.
    fn valid(&self) -> bool {
        let mut seen = [0usize; 6];
        let mut last: Option<u16> = None;
        for e in &self.entries {
            if e.perm & !7 != 0 {
                return false;
            }
            let slot = match e.tag {
                USER_OBJ => 0,
                USER => 1,
                GROUP_OBJ => 2,
                GROUP => 3,
                MASK => 4,
                OTHER => 5,
                _ => return false,
            };
            // Entries come in tag order, as the kernel checks; named entries may repeat a tag
            // in any id order (the kernel does not sort or dedupe them either).
            if let Some(t) = last {
                if e.tag < t || (e.tag == t && !matches!(e.tag, USER | GROUP)) {
                    return false;
                }
            }
            last = Some(e.tag);
            seen[slot] += 1;
        }
        // A mask is needed with named entries and allowed without.
        let named = seen[1] + seen[3];
        seen[0] == 1 && seen[2] == 1 && seen[5] == 1 && seen[4] <= 1 && (named == 0 || seen[4] == 1)
    }

    /// The xattr form.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut b = VERSION.to_le_bytes().to_vec();
        for e in &self.entries {
            b.extend_from_slice(&e.tag.to_le_bytes());
            b.extend_from_slice(&e.perm.to_le_bytes());
            b.extend_from_slice(&e.id.to_le_bytes());
        }
        b
    }

    /// posix_acl_permission(): whether `uid` (a member of the groups `in_group` accepts) gets
    /// every bit of `want` (rwx) on an inode owned by `owner`:`group` with this ACL.
    pub fn permits(
        &self,
        uid: u32,
        in_group: impl Fn(u32) -> bool,
        (owner, group): (u32, u32),
        want: u16,
    ) -> bool {
        let mask = self.entries.iter().find(|e| e.tag == MASK).map(|e| e.perm);
        let masked = |p: u16| p & mask.unwrap_or(0o7) & want == want;
        let mut found = false;
        for e in &self.entries {
            match e.tag {
                USER_OBJ if owner == uid => return e.perm & want == want,
                USER if e.id == uid => return masked(e.perm),
                GROUP_OBJ | GROUP if in_group(if e.tag == GROUP { e.id } else { group }) => {
                    found = true;
                    if e.perm & want == want {
                        return masked(e.perm);
                    }
                }
                OTHER => return !found && e.perm & want == want,
                _ => {}
            }
        }
        false
    }

    /// posix_acl_equiv_mode(): the permission bits the ACL gives (owner, mask or owning group,
    /// other) over `mode`'s other bits, and whether the ACL says more than those bits can.
    pub fn equiv_mode(&self, mode: u32) -> (u32, bool) {
        let mut bits = 0u32;
        let mut more = false;
        for e in &self.entries {
            let p = e.perm as u32;
            match e.tag {
                USER_OBJ => bits |= p << 6,
                GROUP_OBJ => bits |= p << 3,
                OTHER => bits |= p,
                MASK => {
                    bits = (bits & !0o070) | (p << 3);
                    more = true;
                }
                _ => more = true,
            }
        }
        ((mode & !0o777) | bits, more)
    }

    /// posix_acl_create_masq(): a new inode's access ACL from its directory's default ACL and
    /// the mode it was created with; narrows both, and says whether the ACL is still needed.
    pub fn create_masq(&mut self, mode: &mut u32) -> bool {
        let mut m = *mode & 0o777;
        let mut more = false;
        let (mut group_obj, mut mask) = (None, None);
        for (i, e) in self.entries.iter_mut().enumerate() {
            match e.tag {
                USER_OBJ => {
                    e.perm &= ((m >> 6) & 7) as u16;
                    m &= ((e.perm as u32) << 6) | !0o700;
                }
                OTHER => {
                    e.perm &= (m & 7) as u16;
                    m &= e.perm as u32 | !0o007;
                }
                GROUP_OBJ => group_obj = Some(i),
                MASK => {
                    mask = Some(i);
                    more = true;
                }
                _ => more = true,
            }
        }
        if let Some(i) = mask.or(group_obj) {
            let e = &mut self.entries[i];
            e.perm &= ((m >> 3) & 7) as u16;
            m &= ((e.perm as u32) << 3) | !0o070;
        }
        *mode = (*mode & !0o777) | (m & 0o777);
        more
    }

    /// posix_acl_chmod_masq(): the owner, mask (or owning group) and other entries follow a
    /// new mode.
    pub fn chmod(&mut self, mode: u32) {
        let has_mask = self.entries.iter().any(|e| e.tag == MASK);
        for e in &mut self.entries {
            match e.tag {
                USER_OBJ => e.perm = ((mode >> 6) & 7) as u16,
                OTHER => e.perm = (mode & 7) as u16,
                MASK => e.perm = ((mode >> 3) & 7) as u16,
                GROUP_OBJ if !has_mask => e.perm = ((mode >> 3) & 7) as u16,
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A valid ACL: the three base entries, optional named users and groups (sorted, unique
    /// ids) and a mask when there are any.
    fn valid_acl() -> impl Strategy<Value = Acl> {
        let ids = || proptest::collection::btree_set(any::<u32>(), 0..5);
        (prop::array::uniform4(0u16..8), ids(), ids(), any::<bool>()).prop_map(
            |(p, users, groups, lone_mask)| {
                let mut e = vec![Entry {
                    tag: USER_OBJ,
                    perm: p[0],
                    id: 0,
                }];
                e.extend(users.iter().map(|&id| Entry {
                    tag: USER,
                    perm: p[1],
                    id,
                }));
                e.push(Entry {
                    tag: GROUP_OBJ,
                    perm: p[2],
                    id: 0,
                });
                e.extend(groups.iter().map(|&id| Entry {
                    tag: GROUP,
                    perm: p[1],
                    id,
                }));
                if !users.is_empty() || !groups.is_empty() || lone_mask {
                    e.push(Entry {
                        tag: MASK,
                        perm: p[3],
                        id: 0,
                    });
                }
                e.push(Entry {
                    tag: OTHER,
                    perm: p[3],
                    id: 0,
                });
                Acl { entries: e }
            },
        )
    }

    proptest! {
        #[test]
        fn any_bytes_parse_or_fail_cleanly(b in proptest::collection::vec(any::<u8>(), 0..200)) {
            if let Ok(a) = Acl::parse(&b) {
                prop_assert_eq!(a.to_bytes(), b);
            }
        }

        #[test]
        fn valid_acls_round_trip_and_stay_valid(a in valid_acl(), mode in 0u32..0o10000) {
            prop_assert_eq!(Acl::parse(&a.to_bytes())?, a.clone());
            let mut created = a.clone();
            let mut m = mode;
            created.create_masq(&mut m);
            prop_assert!(created.valid());
            prop_assert_eq!(m & !0o777, mode & !0o777);
            prop_assert_eq!(m & 0o777 & !mode, 0, "create never widens the mode");
            let mut changed = a;
            changed.chmod(mode);
            prop_assert!(changed.valid());
            prop_assert_eq!(changed.equiv_mode(0).0, mode & 0o777);
        }
    }

    fn acl(entries: &[(u16, u16, u32)]) -> Acl {
        Acl {
            entries: entries
                .iter()
                .map(|&(tag, perm, id)| Entry { tag, perm, id })
                .collect(),
        }
    }

    #[test]
    fn round_trip_and_validation() {
        let a = acl(&[
            (USER_OBJ, 7, 0),
            (USER, 5, 65534),
            (GROUP_OBJ, 4, 0),
            (MASK, 5, 0),
            (OTHER, 0, 0),
        ]);
        assert_eq!(Acl::parse(&a.to_bytes()).unwrap(), a);
        let no_mask = acl(&[
            (USER_OBJ, 7, 0),
            (USER, 5, 1),
            (GROUP_OBJ, 4, 0),
            (OTHER, 0, 0),
        ]);
        assert!(Acl::parse(&no_mask.to_bytes()).is_err());
        let lone_mask = acl(&[
            (USER_OBJ, 7, 0),
            (GROUP_OBJ, 4, 0),
            (MASK, 4, 0),
            (OTHER, 0, 0),
        ]);
        assert!(Acl::parse(&lone_mask.to_bytes()).is_ok());
        let unsorted = acl(&[(GROUP_OBJ, 4, 0), (USER_OBJ, 7, 0), (OTHER, 0, 0)]);
        assert!(Acl::parse(&unsorted.to_bytes()).is_err());
        let dup = acl(&[
            (USER_OBJ, 7, 0),
            (USER, 5, 3),
            (USER, 5, 3),
            (GROUP_OBJ, 4, 0),
            (MASK, 5, 0),
            (OTHER, 0, 0),
        ]);
        // As the kernel (checked on tmpfs): named entries may repeat or come in any id order.
        assert!(Acl::parse(&dup.to_bytes()).is_ok());
        let ids_unsorted = acl(&[
            (USER_OBJ, 7, 0),
            (USER, 5, 1000),
            (USER, 5, 5),
            (GROUP_OBJ, 4, 0),
            (MASK, 5, 0),
            (OTHER, 0, 0),
        ]);
        assert!(Acl::parse(&ids_unsorted.to_bytes()).is_ok());
        let big_perm = acl(&[(USER_OBJ, 8, 0), (GROUP_OBJ, 4, 0), (OTHER, 0, 0)]);
        assert!(Acl::parse(&big_perm.to_bytes()).is_err());
        for junk in [
            &[][..],
            &[2, 0, 0][..],
            &[1, 0, 0, 0][..],
            &[2, 0, 0, 0, 1][..],
        ] {
            assert!(Acl::parse(junk).is_err(), "{junk:?}");
        }
    }

    #[test]
    fn equivalent_acls_are_just_a_mode() {
        let a = acl(&[(USER_OBJ, 6, 0), (GROUP_OBJ, 4, 0), (OTHER, 4, 0)]);
        assert_eq!(a.equiv_mode(0o104777), (0o104644, false));
        let m = acl(&[
            (USER_OBJ, 7, 0),
            (USER, 7, 5),
            (GROUP_OBJ, 5, 0),
            (MASK, 6, 0),
            (OTHER, 1, 0),
        ]);
        assert_eq!(m.equiv_mode(0o40000), (0o40761, true));
    }

    #[test]
    fn create_masks_the_default_acl_with_the_mode() {
        // setfacl -d -m u::rwx,u:5:rwx,g::rx,m::rwx,o::rx ; open(O_CREAT, 0666)
        let mut a = acl(&[
            (USER_OBJ, 7, 0),
            (USER, 7, 5),
            (GROUP_OBJ, 5, 0),
            (MASK, 7, 0),
            (OTHER, 5, 0),
        ]);
        let mut mode = 0o100666;
        assert!(a.create_masq(&mut mode));
        assert_eq!(mode, 0o100664);
        let want = acl(&[
            (USER_OBJ, 6, 0),
            (USER, 7, 5),
            (GROUP_OBJ, 5, 0),
            (MASK, 6, 0),
            (OTHER, 4, 0),
        ]);
        assert_eq!(a, want);
        let mut plain = acl(&[(USER_OBJ, 7, 0), (GROUP_OBJ, 5, 0), (OTHER, 0, 0)]);
        let mut mode = 0o40777;
        assert!(!plain.create_masq(&mut mode));
        assert_eq!(mode, 0o40750);
    }

    #[test]
    fn chmod_moves_the_mask_not_the_owning_group() {
        let mut a = acl(&[
            (USER_OBJ, 7, 0),
            (USER, 7, 5),
            (GROUP_OBJ, 5, 0),
            (MASK, 7, 0),
            (OTHER, 5, 0),
        ]);
        a.chmod(0o640);
        assert_eq!(a.equiv_mode(0), (0o640, true));
        assert_eq!(a.entries[2].perm, 5, "owning group entry unchanged");
        let mut b = acl(&[(USER_OBJ, 7, 0), (GROUP_OBJ, 5, 0), (OTHER, 5, 0)]);
        b.chmod(0o604);
        assert_eq!(b.equiv_mode(0), (0o604, false));
    }
}
