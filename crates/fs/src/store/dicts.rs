//! The store's dictionaries: zstd dictionaries the filesystem trained on its own small
//! extents, each under a one-byte id that the extents compressed with it carry (byte 3 of the
//! extent header). A dictionary is written in a transaction of its own before any extent
//! names it, so every commit that holds such an extent holds its dictionary too.
//!
//! btrfs has no counterpart: its on-disk format has no place for a dictionary. The store's
//! format version ([`crate::store::format`]) is at least 2 once one is stored. (Binaries from
//! before versions were checked would read an extent that needs a dictionary as damaged: EIO
//! and a log line.)

use redb::{ReadTransaction, ReadableTable, TableDefinition, WriteTransaction};

use wring_engine::dict::Dictionary;

use crate::error::FsError;
use crate::store::layout::{Problem, RecordError};
use crate::store::table_if_made;

/// Dictionary id → the dictionary's bytes (zstd's format).
pub const DICTS: TableDefinition<u32, &[u8]> = TableDefinition::new("dicts");
/// The format version of a store that holds dictionaries.
pub const VERSION_DICTS: u64 = 2;
/// Store dictionary `id` (and the format version that says the store holds dictionaries).
pub fn put(txn: &WriteTransaction, id: u8, bytes: &[u8]) -> Result<(), FsError> {
    txn.open_table(DICTS)?.insert(u32::from(id), bytes)?;
    crate::store::format::raise(txn, VERSION_DICTS)
}

/// The id the next dictionary gets; `None` when all 255 are taken.
pub fn next_id(txn: &WriteTransaction) -> Result<Option<u8>, FsError> {
    let t = txn.open_table(DICTS)?;
    let last = t.last()?.map_or(0, |(k, _)| k.value());
    Ok(u8::try_from(last.saturating_add(1)).ok())
}

/// Every record of the dictionary table as stored: (key, bytes), by key.
pub fn all(txn: &ReadTransaction) -> Result<Vec<(u32, Vec<u8>)>, FsError> {
    let Some(t) = table_if_made(txn, DICTS)? else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for r in t.iter()? {
        let (k, v) = r?;
        out.push((k.value(), v.value().to_vec()));
    }
    Ok(out)
}

/// The dictionary record's name in errors.
const R: &str = "dictionary";

/// A record of the dictionary table, checked: its id (1 to 255, what an extent header can
/// name) and the dictionary, digested. The error names the key or the bytes.
pub fn record(key: u32, bytes: &[u8]) -> Result<(u8, Dictionary), RecordError> {
    let id = u8::try_from(key)
        .ok()
        .filter(|&id| id != 0)
        .ok_or_else(|| {
            let why = "not an id an extent can name (1 to 255)";
            RecordError::new(
                R,
                "id",
                Problem::Invalid {
                    value: key.into(),
                    why,
                },
            )
        })?;
    let dict = Dictionary::new(bytes.to_vec()).map_err(|e| {
        let why = format!("dictionary {id} does not digest: {e}");
        RecordError::new(R, "bytes", Problem::Unreadable { why })
    })?;
    Ok((id, dict))
}

/// Dictionary `id`'s bytes, if the store has it.
pub fn get(txn: &ReadTransaction, id: u8) -> Result<Option<Vec<u8>>, FsError> {
    let Some(t) = table_if_made(txn, DICTS)? else {
        return Ok(None);
    };
    Ok(t.get(u32::from(id))?.map(|v| v.value().to_vec()))
}
