//! Metadata snapshots under `PREFIX/meta/NAME` for handover (the filesystem's redb store).
//! Mirrors the superblock copy a btrfs device carries for whoever mounts it next.

use super::*;

impl ObjStore {
    /// `PREFIX/meta/NAME`: where the filesystem keeps metadata snapshots for handover.
    pub(super) fn meta_path(&self, name: &str) -> Result<ObjPath> {
        let ok = !name.is_empty()
            && name.len() <= 128
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
            && !name.starts_with('.');
        if !ok {
            return Err(Error::Config(format!(
                "`{name}` is not a metadata object name (1 to 128 of A-Z a-z 0-9 - _ ., not \
                 starting with .)"
            )));
        }
        let p = self.inner.cfg.prefix.trim_matches('/');
        Ok(ObjPath::from(if p.is_empty() {
            format!("meta/{name}")
        } else {
            format!("{p}/meta/{name}")
        }))
    }

    /// Store `bytes` as the metadata object `PREFIX/meta/NAME` (a snapshot of the redb store
    /// for handover), replacing what was there.
    pub fn put_meta(&self, name: &str, bytes: Vec<u8>) -> Result<()> {
        let path = self.meta_path(name)?;
        let len = bytes.len() as u64;
        match self.block(self.inner.store.put(&path, PutPayload::from(bytes))) {
            Ok(_) => {
                self.inner.n.puts.fetch_add(1, Ordering::Relaxed);
                self.inner.n.put_bytes.fetch_add(len, Ordering::Relaxed);
                Ok(())
            }
            Err(source) => Err(Error::Request {
                what: format!("writing {}", self.url(&path)),
                source,
            }),
        }
    }

    /// The metadata object `PREFIX/meta/NAME`, or None when there is none; an object larger
    /// than `limit` bytes is refused ([`Error::TooLarge`]) before it is read.
    pub fn get_meta(&self, name: &str, limit: u64) -> Result<Option<Bytes>> {
        let path = self.meta_path(name)?;
        let got = self.block(get_capped(&self.inner, &path, limit, "metadata object"))?;
        Ok(got.map(|(b, _)| b))
    }

    /// Delete the metadata object `PREFIX/meta/NAME` (nothing to do when it is not there).
    pub fn delete_meta(&self, name: &str) -> Result<()> {
        self.delete_object(&self.meta_path(name)?)
    }
}
