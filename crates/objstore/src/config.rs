//! Where the segments go and how the store behaves: bucket, prefix, endpoint, credentials,
//! segment and cache sizes, upload parallelism.

use std::time::Duration;

use crate::creds::Credentials;
use crate::error::{Error, Result};

/// Default segment size: 4 MiB.
pub const SEGMENT_BYTES: u32 = 4 << 20;
/// Default cache chunk: 256 KiB.
pub const CHUNK_BYTES: u32 = 256 << 10;
/// The largest extent, and the largest segment size: 1 GiB (a segment's data, at most twice
/// that, stays under the 4 GiB an address's offset reaches).
pub const MAX_EXTENT: u64 = 1 << 30;
/// Default cache limit: 256 MiB.
pub const CACHE_BYTES: u64 = 256 << 20;
/// Segment indexes kept in memory by default (an index is 12 bytes per extent: a 4 MiB segment
/// of 16 KiB extents has a 3 KiB index, so 1024 of them are about 3 MiB).
pub const INDEX_CACHE: usize = 1024;

/// How to reach the bucket and how to use it.
#[derive(Debug, Clone)]
pub struct Config {
    /// The bucket's name.
    pub bucket: String,
    /// The key prefix of this filesystem's objects (no leading or trailing `/`).
    pub prefix: String,
    /// The S3 endpoint (`http://127.0.0.1:8333` for a local SeaweedFS); None for AWS.
    pub endpoint: Option<String>,
    /// The region signed into requests.
    pub region: String,
    /// The key pair.
    pub credentials: Credentials,
    /// A segment is sealed and uploaded once its object (data, index, trailer) would pass
    /// this many bytes (an extent larger than that alone still makes one object).
    pub segment_bytes: u32,
    /// The unit of ranged reads and of the cache.
    pub chunk_bytes: u32,
    /// The cache's byte limit.
    pub cache_bytes: u64,
    /// Segment indexes kept in memory, least recently used out first.
    pub index_cache: usize,
    /// Uploads running at once.
    pub max_uploads: usize,
    /// Sealed segments that may wait for upload before appends wait.
    pub queue_segments: usize,
    /// Chunks read ahead when reads are sequential (0: none).
    pub prefetch_chunks: u32,
    /// How long sync and appends wait for the bucket before failing.
    pub wait: Duration,
    /// One request's time limit.
    pub request_timeout: Duration,
}

impl Config {
    /// A configuration from `s3://BUCKET/PREFIX` with the defaults.
    pub fn from_url(url: &str, credentials: Credentials) -> Result<Config> {
        let (bucket, prefix) = parse_url(url)?;
        Ok(Config {
            bucket,
            prefix,
            endpoint: None,
            region: "us-east-1".into(),
            credentials,
            segment_bytes: SEGMENT_BYTES,
            chunk_bytes: CHUNK_BYTES,
            cache_bytes: CACHE_BYTES,
            index_cache: INDEX_CACHE,
            max_uploads: 4,
            queue_segments: 8,
            prefetch_chunks: 4,
            wait: Duration::from_secs(60),
            request_timeout: Duration::from_secs(30),
        })
    }

    /// Refuse settings that cannot work.
    pub fn check(&self) -> Result<()> {
        if self.segment_bytes == 0 || self.chunk_bytes == 0 {
            return Err(Error::Config(
                "segment and chunk sizes must not be 0".into(),
            ));
        }
        if self.segment_bytes as u64 > MAX_EXTENT {
            return Err(Error::Config(format!(
                "segment_bytes {} is over the limit of {MAX_EXTENT}",
                self.segment_bytes
            )));
        }
        if self.max_uploads == 0 || self.queue_segments == 0 || self.index_cache == 0 {
            return Err(Error::Config(
                "max_uploads, queue_segments and index_cache must not be 0".into(),
            ));
        }
        if let Some(e) = &self.endpoint {
            allow_http(e)?;
        }
        Ok(())
    }
}

/// `s3://BUCKET/PREFIX` → (bucket, prefix).
pub fn parse_url(url: &str) -> Result<(String, String)> {
    let Some(rest) = url.strip_prefix("s3://") else {
        return Err(Error::Config(format!(
            "{url} is not an s3://BUCKET/PREFIX URL"
        )));
    };
    let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    let valid = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.';
    if bucket.len() < 3 || bucket.len() > 63 || !bucket.chars().all(valid) {
        return Err(Error::Config(format!(
            "{url}: `{bucket}` is not a bucket name (3 to 63 of a-z, 0-9, '-', '.')"
        )));
    }
    Ok((bucket.to_string(), prefix.trim_matches('/').to_string()))
}

/// Whether the endpoint may be plain http: only on this machine (loopback), where nothing
/// crosses a network. Returns whether http is in use.
pub fn allow_http(endpoint: &str) -> Result<bool> {
    let Some(rest) = endpoint.strip_prefix("http://") else {
        if endpoint.starts_with("https://") {
            return Ok(false);
        }
        return Err(Error::Config(format!(
            "endpoint {endpoint} must start with https:// (or http:// on this machine)"
        )));
    };
    let host_port = rest.split('/').next().unwrap_or_default();
    let host = match host_port.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => host_port.split(':').next().unwrap_or_default(),
    };
    let local = host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    if !local {
        return Err(Error::Config(format!(
            "endpoint {endpoint} is plain http to another machine: credentials and data would \
             cross the network unencrypted; use https://"
        )));
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        assert_eq!(
            parse_url("s3://bkt/a/b/").ok(),
            Some(("bkt".into(), "a/b".into()))
        );
        assert_eq!(parse_url("s3://bkt").ok(), Some(("bkt".into(), "".into())));
        assert!(parse_url("http://bkt/a").is_err());
        assert!(parse_url("s3://B_K/a").is_err());
    }

    #[test]
    fn http_only_locally() {
        assert!(allow_http("http://127.0.0.1:8333").is_ok_and(|h| h));
        assert!(allow_http("http://localhost:1").is_ok_and(|h| h));
        assert!(allow_http("http://[::1]:1/").is_ok_and(|h| h));
        assert!(allow_http("https://s3.example.com").is_ok_and(|h| !h));
        assert!(allow_http("http://10.0.0.1:8333").is_err());
        assert!(allow_http("ftp://x").is_err());
    }
}
