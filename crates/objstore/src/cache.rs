//! The local cache of segment chunks (fixed-size pieces of segments' data, read or written),
//! least recently used first out, within a byte limit — the page cache's role for the bucket.

use std::collections::{BTreeMap, HashMap};

use bytes::Bytes;

/// A chunk: (segment, chunk number).
pub type Key = (u32, u32);

/// Chunks by key, with their use order and the bytes held.
#[derive(Debug, Default)]
pub struct Cache {
    limit: u64,
    bytes: u64,
    tick: u64,
    map: HashMap<Key, (Bytes, u64)>,
    order: BTreeMap<u64, Key>,
    /// Lookups that found their chunk.
    pub hits: u64,
    /// Lookups that did not.
    pub misses: u64,
    /// Chunks dropped for the limit.
    pub evictions: u64,
}

impl Cache {
    /// An empty cache holding at most `limit` bytes.
    pub fn new(limit: u64) -> Cache {
        Cache {
            limit,
            ..Cache::default()
        }
    }

    /// Bytes held.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The chunk, marked as just used.
    pub fn get(&mut self, key: Key) -> Option<Bytes> {
        self.tick += 1;
        let tick = self.tick;
        match self.map.get_mut(&key) {
            Some((b, t)) => {
                self.order.remove(t);
                *t = tick;
                self.order.insert(tick, key);
                self.hits += 1;
                Some(b.clone())
            }
            None => {
                self.misses += 1;
                None
            }
        }
    }

    /// Whether the chunk is held (not counted as a use).
    pub fn contains(&self, key: Key) -> bool {
        self.map.contains_key(&key)
    }

    /// Hold a chunk, dropping the least recently used ones past the limit. A chunk larger
    /// than the whole limit is not held.
    pub fn insert(&mut self, key: Key, bytes: Bytes) {
        self.remove(key);
        if bytes.len() as u64 > self.limit {
            return;
        }
        self.tick += 1;
        self.bytes += bytes.len() as u64;
        self.map.insert(key, (bytes, self.tick));
        self.order.insert(self.tick, key);
        while self.bytes > self.limit {
            let Some((_, old)) = self.order.pop_first() else {
                break;
            };
            if let Some((b, _)) = self.map.remove(&old) {
                self.bytes -= b.len() as u64;
                self.evictions += 1;
            }
        }
    }

    /// Drop a chunk.
    pub fn remove(&mut self, key: Key) {
        if let Some((b, t)) = self.map.remove(&key) {
            self.order.remove(&t);
            self.bytes -= b.len() as u64;
        }
    }

    /// Drop every chunk of `segment`.
    pub fn remove_segment(&mut self, segment: u32) {
        let keys: Vec<Key> = self
            .map
            .keys()
            .filter(|k| k.0 == segment)
            .copied()
            .collect();
        for k in keys {
            self.remove(k);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limit_and_order() {
        let mut c = Cache::new(300);
        for i in 0..3 {
            c.insert((1, i), Bytes::from(vec![0u8; 100]));
        }
        assert!(c.get((1, 0)).is_some());
        c.insert((1, 3), Bytes::from(vec![0u8; 100]));
        assert_eq!(c.bytes(), 300);
        assert!(c.contains((1, 0)), "recently used chunk was evicted");
        assert!(!c.contains((1, 1)), "least recently used chunk was kept");
        c.insert((2, 0), Bytes::from(vec![0u8; 400]));
        assert!(!c.contains((2, 0)));
        c.remove_segment(1);
        assert_eq!(c.bytes(), 0);
    }
}
