//! The lease object `PREFIX/lease`: taken with a conditional put, renewed, released, broken.
//! Mirrors btrfs refusing a second mount of one device (its exclusive open).

use super::*;

impl ObjStore {
    pub(super) fn lease_path(&self) -> ObjPath {
        let p = self.inner.cfg.prefix.trim_matches('/');
        ObjPath::from(if p.is_empty() {
            "lease".to_string()
        } else {
            format!("{p}/lease")
        })
    }

    /// The lease as it is in the bucket (None when nobody holds it), with its version.
    pub(super) fn lease_now(&self) -> Result<Option<(Lease, UpdateVersion)>> {
        let path = self.lease_path();
        let corrupt = |why: String| Error::Corrupt {
            object: self.url(&path),
            why: format!("{why} (break the lease to replace it)"),
        };
        let got = match self.block(get_capped(&self.inner, &path, MAX_LEASE, "lease record")) {
            Ok(g) => g,
            Err(Error::TooLarge(why)) => return Err(corrupt(why)),
            Err(e) => return Err(e),
        };
        let Some((bytes, version)) = got else {
            return Ok(None);
        };
        let lease = Lease::parse(&bytes).map_err(|e| corrupt(e.0))?;
        Ok(Some((lease, version)))
    }

    /// Who holds the lease, if anyone.
    pub fn lease(&self) -> Result<Option<Lease>> {
        Ok(self.lease_now()?.map(|(l, _)| l))
    }

    /// Take the lease for `holder`: created only if absent (a conditional put, If-None-Match),
    /// renewed if `holder` already holds it, refused with [`Error::LeaseHeld`] naming the
    /// holder otherwise.
    pub fn acquire_lease(&self, holder: &str) -> Result<Lease> {
        valid_holder(holder).map_err(|e| Error::Config(e.0))?;
        let path = self.lease_path();
        let lease = Lease {
            holder: holder.to_string(),
            since: now_unix(),
        };
        for _ in 0..3 {
            let mode = match self.lease_now()? {
                None => PutMode::Create,
                Some((l, version)) if l.holder == holder => PutMode::Update(version),
                Some((l, _)) => {
                    return Err(Error::LeaseHeld {
                        object: self.url(&path),
                        holder: l.holder,
                        since: l.since,
                    })
                }
            };
            let opts = PutOptions::from(mode);
            let body = PutPayload::from(lease.encode());
            match self.block(self.inner.store.put_opts(&path, body, opts)) {
                Ok(_) => {
                    self.inner.n.puts.fetch_add(1, Ordering::Relaxed);
                    return Ok(lease);
                }
                // Someone else wrote it between our read and our put: look again.
                Err(object_store::Error::AlreadyExists { .. })
                | Err(object_store::Error::Precondition { .. }) => continue,
                Err(source) => {
                    let what = format!("writing {}", self.url(&path));
                    return Err(Error::Request { what, source });
                }
            }
        }
        match self.lease()? {
            Some(l) if l.holder != holder => Err(Error::LeaseHeld {
                object: self.url(&path),
                holder: l.holder,
                since: l.since,
            }),
            _ => Err(Error::Config(format!(
                "{} changed under every attempt to take it; try again",
                self.url(&path)
            ))),
        }
    }

    /// Give the lease up. Refused when someone else holds it; nothing to do when nobody does.
    pub fn release_lease(&self, holder: &str) -> Result<()> {
        let path = self.lease_path();
        match self.lease_now()? {
            None => Ok(()),
            Some((l, _)) if l.holder != holder => Err(Error::LeaseHeld {
                object: self.url(&path),
                holder: l.holder,
                since: l.since,
            }),
            Some(_) => self.delete_object(&path),
        }
    }

    /// Break the lease whoever holds it (a stale one: its holder is gone). Returns the lease
    /// that was broken; a corrupt record is removed as well.
    pub fn break_lease(&self) -> Result<Option<Lease>> {
        let path = self.lease_path();
        let old = match self.lease_now() {
            Ok(l) => l.map(|(l, _)| l),
            Err(Error::Corrupt { .. }) => None,
            Err(e) => return Err(e),
        };
        self.delete_object(&path)?;
        Ok(old)
    }

    /// Delete the object at `path` (the lease, a metadata snapshot); one already gone is not
    /// an error.
    pub(super) fn delete_object(&self, path: &ObjPath) -> Result<()> {
        match self.block(self.inner.store.delete(path)) {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => {
                self.inner.n.deletes.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            Err(source) => Err(Error::Request {
                what: format!("deleting {}", self.url(path)),
                source,
            }),
        }
    }
}

/// The most a lease record may be (its holder is at most 256 bytes).
pub(super) const MAX_LEASE: u64 = 4096;
