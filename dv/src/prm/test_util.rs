//! Checks shared by the layout tests.

use std::fmt::Debug;

use super::{Codec, Field, FieldError};

/// One field set alone in a zeroed structure: the value, and every byte that must then be
/// non-zero as `(offset, value)`, written by hand from the C structure definitions.
pub type Case = (Field, u64, &'static [(usize, u8)]);

/// Each case changes exactly its listed bytes, reads back, and every field of `all` has at
/// least one case.
pub fn check_cases(size: usize, all: &[Field], cases: &[Case]) {
    for (f, value, expect) in cases {
        let mut buf = vec![0u8; size];
        assert_eq!(f.set(&mut buf, *value), Ok(()), "{} = 0x{value:x} is set", f.name);
        let changed: Vec<(usize, u8)> =
            buf.iter().enumerate().filter(|(_, b)| **b != 0).map(|(i, b)| (i, *b)).collect();
        assert_eq!(changed, expect.to_vec(), "{} = 0x{value:x}: (offset, byte) changed", f.name);
        assert_eq!(f.get(&buf), Ok(*value), "{} reads back", f.name);
    }
    for f in all {
        assert!(cases.iter().any(|(c, _, _)| c == f), "field {} has no byte-offset case", f.name);
    }
}

/// Every buffer shorter than the structure is refused by decode and encode, without panic.
pub fn check_short<T: Codec + Default>() {
    let zeros = vec![0u8; T::SIZE];
    for len in 0..T::SIZE {
        assert!(matches!(T::decode(&zeros[..len]), Err(FieldError::TooShort { .. })), "decode of {len} bytes");
        let mut out = vec![0xa5u8; len];
        assert!(matches!(T::default().encode(&mut out), Err(FieldError::TooShort { .. })), "encode into {len}");
        assert!(out.iter().all(|b| *b == 0xa5), "a failed encode leaves the buffer alone");
    }
    assert!(T::decode(&zeros).is_ok());
}

/// Bytes → struct → bytes keeps exactly the named fields' bits (reserved bits come back
/// zero), and struct → bytes → struct is the identity.
pub fn check_round_trip<T: Codec + PartialEq + Debug>(bytes: &[u8], all: &[Field]) {
    let decoded = T::decode(bytes);
    assert!(decoded.is_ok(), "decode: {decoded:?}");
    let Ok(s) = decoded else { return };
    let mut out = vec![0u8; T::SIZE];
    assert_eq!(s.encode(&mut out), Ok(()), "encode");
    let mut mask = vec![0u8; T::SIZE];
    for f in all {
        let ones = if f.width == 64 { u64::MAX } else { (1u64 << f.width) - 1 };
        assert_eq!(f.set(&mut mask, ones), Ok(()), "{} takes all ones", f.name);
    }
    let masked: Vec<u8> = bytes.iter().zip(&mask).map(|(b, m)| b & m).collect();
    assert_eq!(out, masked, "only named bits survive");
    assert_eq!(T::decode(&out).ok().as_ref(), Some(&s), "struct round trip");
}
