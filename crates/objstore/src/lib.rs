//! wring's extents in an S3 object store (see docs/objstore.md).
