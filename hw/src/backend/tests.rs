//! The backend's checks that need no device.

use mlx5_dv::{AccessFlags, Memory};

use super::*;

type TestResult = std::result::Result<(), Box<dyn std::error::Error>>;

fn errno<T>(r: Result<T>) -> Option<i32> {
    r.err().map(|e| e.errno())
}

// Buffers need no device, so their handle checks run on any host with libmlx5.
#[test]
fn freed_and_foreign_buffers_are_einval() -> TestResult {
    let mut b = HwBackend::open(HwConfig::default())?;
    let mut other = HwBackend::open(HwConfig::default())?;
    let buf = b.alloc_buf(100)?;
    b.write_buf(&buf, 96, &[1, 2, 3, 4])?;
    assert_eq!(b.read_buf(&buf, 96, 4)?, [1, 2, 3, 4]);
    assert_eq!(errno(b.read_buf(&buf, 98, 4)), Some(EINVAL), "past the end");
    assert_eq!(errno(other.read_buf(&buf, 0, 1)), Some(EINVAL), "another instance's buffer");
    assert_eq!(errno(other.free_buf(&buf)), Some(EINVAL));

    let foreign_pd = PdHandle::new(BackendId::fresh(), 1);
    assert_eq!(errno(b.reg_mr(foreign_pd, buf.addr, 4, AccessFlags::empty())), Some(EINVAL));

    b.free_buf(&buf)?;
    assert_eq!(errno(b.free_buf(&buf)), Some(EINVAL), "stale");
    assert_eq!(errno(b.write_buf(&buf, 0, &[0])), Some(EINVAL));
    let again = b.alloc_buf(100)?;
    assert_ne!(again.handle, buf.handle, "ids are never reused");
    // `again` is still allocated: Drop frees it.
    Ok(())
}
