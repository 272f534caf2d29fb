//! Typed views: a byte buffer whose length was checked once against a layout, read and
//! written through that layout's named fields without further checks.
//!
//! Every layout is declared with [`layout!`], which emits the field constants, a plain struct
//! with one host-typed member per field, the [`Layout`] impl, infallible getters on
//! [`View`], setters on [`ViewMut`], and `encode` / `decode` / `to_bytes` on the struct. A
//! compile-time assertion proves each field lies inside the layout and fits its host type,
//! so a view whose buffer holds `SIZE` bytes can read every field without an error path.

use std::fmt;
use std::marker::PhantomData;

use super::{Field, FieldError};

pub(crate) mod sealed {
    /// Only the tables of this crate are layouts: their fields are proven in bounds.
    pub trait Sealed {}
}

/// A PRM structure described by a field table.
pub trait Layout: sealed::Sealed {
    /// The PRM (or rdma-core) name of the structure.
    const NAME: &'static str;
    /// Size in bytes.
    const SIZE: usize;
    /// Every named field, in offset order; reserved bits have no entry.
    const FIELDS: &'static [Field];
}

/// A plain struct that encodes to and decodes from a fixed number of bytes (every layout's
/// struct, and composites such as the BSF); lets ring and list code be generic.
pub trait Codec: Sized {
    /// Bytes the structure takes.
    const SIZE: usize;
    /// Read the structure from the first `SIZE` bytes of `buf`.
    fn decode(buf: &[u8]) -> Result<Self, FieldError>;
    /// Write the structure into the first `SIZE` bytes of `out`.
    fn encode(&self, out: &mut [u8]) -> Result<(), FieldError>;
}

/// Decode `n` consecutive `T`s from the start of `buf` (KLM lists, repeat block entries).
pub fn decode_array<T: Codec>(buf: &[u8], n: usize, layout: &'static str) -> Result<Vec<T>, FieldError> {
    let len = buf.len();
    let need = n.checked_mul(T::SIZE).ok_or(FieldError::TooShort { layout, need: usize::MAX, len })?;
    let items = buf.get(..need).ok_or(FieldError::TooShort { layout, need, len })?;
    // `T::SIZE` is a layout size, never zero; `max(1)` keeps `chunks_exact` total anyway.
    items.chunks_exact(T::SIZE.max(1)).map(T::decode).collect()
}

/// Encode `items` back to back from the start of `out`; returns the bytes written. On error
/// `out` may hold the items before the failing one.
pub fn encode_array<T: Codec>(items: &[T], out: &mut [u8], layout: &'static str) -> Result<usize, FieldError> {
    let len = out.len();
    let need = items.len().checked_mul(T::SIZE).ok_or(FieldError::TooShort { layout, need: usize::MAX, len })?;
    let dst = out.get_mut(..need).ok_or(FieldError::TooShort { layout, need, len })?;
    for (item, chunk) in items.iter().zip(dst.chunks_exact_mut(T::SIZE.max(1))) {
        item.encode(chunk)?;
    }
    Ok(need)
}

/// True when no two fields share a bit: then every field of a struct can be written in any
/// order and read back unchanged.
pub(crate) const fn disjoint(fields: &[Field]) -> bool {
    let mut i = 0;
    while i < fields.len() {
        let mut j = i + 1;
        while j < fields.len() {
            let (a, b) = (&fields[i], &fields[j]);
            if a.bit_off < b.bit_off + b.width && b.bit_off < a.bit_off + a.width {
                return false;
            }
            j += 1;
        }
        i += 1;
    }
    true
}

/// A host type a field reads into.
pub(crate) trait FieldValue: Copy {
    /// Bits the type holds.
    const BITS: u32;
    /// From a raw field value already masked to the field's width.
    fn from_raw(raw: u64) -> Self;
    /// To the raw field value.
    fn to_raw(self) -> u64;
}

impl FieldValue for bool {
    const BITS: u32 = 1;
    #[inline]
    fn from_raw(raw: u64) -> Self {
        raw != 0
    }
    #[inline]
    fn to_raw(self) -> u64 {
        u64::from(self)
    }
}

macro_rules! field_value_uint {
    ($($t:ty),*) => {$(
        impl FieldValue for $t {
            const BITS: u32 = <$t>::BITS;
            #[inline]
            fn from_raw(raw: u64) -> Self {
                // The raw value is masked to the field, and the field is no wider than the
                // type (checked where the layout is declared): nothing is cut off.
                raw as $t
            }
            #[inline]
            fn to_raw(self) -> u64 {
                u64::from(self)
            }
        }
    )*};
}
field_value_uint!(u8, u16, u32, u64);

/// A read-only view of a buffer holding layout `L` in its first `L::SIZE` bytes.
pub struct View<'a, L: Layout> {
    head: &'a [u8],
    tail: &'a [u8],
    _layout: PhantomData<fn() -> L>,
}

impl<'a, L: Layout> View<'a, L> {
    /// Check `buf` holds at least `L::SIZE` bytes; the rest is kept as [`View::tail`].
    #[inline]
    pub fn new(buf: &'a [u8]) -> Result<Self, FieldError> {
        let (head, tail) = buf.split_at_checked(L::SIZE).ok_or(FieldError::TooShort {
            layout: L::NAME,
            need: L::SIZE,
            len: buf.len(),
        })?;
        Ok(View { head, tail, _layout: PhantomData })
    }

    /// The structure's own `L::SIZE` bytes.
    pub fn bytes(&self) -> &'a [u8] {
        self.head
    }

    /// The bytes after the structure (translation entries, the next segment, ...).
    pub fn tail(&self) -> &'a [u8] {
        self.tail
    }

    /// Read any field (for instance one of an enclosed structure moved with [`Field::at`]);
    /// fallible because the field need not belong to `L`.
    pub fn get(&self, f: Field) -> Result<u64, FieldError> {
        f.get(self.head)
    }

    /// Read a field of `L`'s own table.
    #[inline]
    pub(crate) fn raw(&self, f: Field) -> u64 {
        // `f` is one of L's fields, proven at compile time to lie inside L::SIZE, and `head`
        // holds exactly L::SIZE bytes: the read cannot fail.
        f.get(self.head).unwrap_or_default()
    }

    /// Every field as `(name, value)`, for logs.
    pub fn decode(&self) -> Vec<(&'static str, u64)> {
        L::FIELDS.iter().map(|f| (f.name, self.raw(*f))).collect()
    }
}

impl<L: Layout> Clone for View<'_, L> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<L: Layout> Copy for View<'_, L> {}

impl<L: Layout> fmt::Debug for View<'_, L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// `name { field: 0x.., ... }`, every field in table order.
impl<L: Layout> fmt::Display for View<'_, L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {{", L::NAME)?;
        for (i, (name, value)) in self.decode().into_iter().enumerate() {
            let sep = if i == 0 { " " } else { ", " };
            write!(f, "{sep}{name}: 0x{value:x}")?;
        }
        write!(f, " }}")
    }
}

/// A writable view of a buffer holding layout `L` in its first `L::SIZE` bytes.
pub struct ViewMut<'a, L: Layout> {
    head: &'a mut [u8],
    _layout: PhantomData<fn() -> L>,
}

impl<'a, L: Layout> ViewMut<'a, L> {
    /// Check `buf` holds at least `L::SIZE` bytes; only those are reachable through the view.
    #[inline]
    pub fn new(buf: &'a mut [u8]) -> Result<Self, FieldError> {
        let len = buf.len();
        let head = buf.get_mut(..L::SIZE).ok_or(FieldError::TooShort { layout: L::NAME, need: L::SIZE, len })?;
        Ok(ViewMut { head, _layout: PhantomData })
    }

    /// A read-only view of the same bytes.
    pub fn view(&self) -> View<'_, L> {
        View { head: self.head, tail: &[], _layout: PhantomData }
    }

    /// Zero the structure, reserved bits included.
    pub fn clear(&mut self) {
        self.head.fill(0);
    }

    /// Write any field; fallible because the field need not belong to `L`.
    pub fn set(&mut self, f: Field, value: u64) -> Result<(), FieldError> {
        f.set(self.head, value)
    }

    /// Write a field of `L`'s own table: only a value wider than the field can fail.
    #[inline]
    pub(crate) fn set_raw(&mut self, f: Field, value: u64) -> Result<(), FieldError> {
        f.set(self.head, value)
    }
}

/// Declare a layout: field constants, `ALL`, the plain struct, its [`Layout`] impl, typed
/// accessors on [`View`] / [`ViewMut`], and the struct's codec.
///
/// Each field line is `CONST => getter / setter: HostType = (bit_off, width);`; the getter
/// name is the field's PRM name.
macro_rules! layout {
    (
        $(#[$sm:meta])*
        struct $ty:ident = $name:literal, $size:expr;
        $(
            $(#[$fm:meta])*
            $konst:ident => $get:ident / $set:ident : $t:ty = ($off:expr, $w:expr);
        )+
    ) => {
        $(
            $(#[$fm])*
            pub const $konst: $crate::prm::Field = $crate::prm::Field::new(stringify!($get), $off, $w);
        )+

        /// Every field of this table.
        pub const ALL: &[$crate::prm::Field] = &[$($konst),+];

        // Proven once here, so the accessors below need no error path.
        const _: () = {
            assert!($crate::prm::view::disjoint(ALL), concat!("two fields of ", $name, " overlap"));
            $(
                assert!($konst.fits($size), concat!(stringify!($konst), " does not lie inside ", $name));
                assert!(
                    $w <= <$t as $crate::prm::view::FieldValue>::BITS,
                    concat!(stringify!($konst), " is wider than its host type")
                );
            )+
        };

        $(#[$sm])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
        pub struct $ty {
            $(
                $(#[$fm])*
                pub $get: $t,
            )+
        }

        impl $crate::prm::view::sealed::Sealed for $ty {}

        impl $crate::prm::Layout for $ty {
            const NAME: &'static str = $name;
            const SIZE: usize = $size;
            const FIELDS: &'static [$crate::prm::Field] = ALL;
        }

        // A field may be called `len` (mkc): it is a PRM length, not a container size.
        #[allow(clippy::len_without_is_empty)]
        impl $crate::prm::View<'_, $ty> {
            $(
                $(#[$fm])*
                #[inline]
                pub fn $get(&self) -> $t {
                    <$t as $crate::prm::view::FieldValue>::from_raw(self.raw($konst))
                }
            )+
        }

        impl $crate::prm::ViewMut<'_, $ty> {
            $(
                #[doc = concat!("Write `", stringify!($get), "`; a value wider than the field is refused.")]
                #[inline]
                pub fn $set(&mut self, value: $t) -> Result<(), $crate::prm::FieldError> {
                    self.set_raw($konst, <$t as $crate::prm::view::FieldValue>::to_raw(value))
                }
            )+
        }

        impl $crate::prm::Codec for $ty {
            const SIZE: usize = $size;
            fn decode(buf: &[u8]) -> Result<Self, $crate::prm::FieldError> {
                <$ty>::decode(buf)
            }
            fn encode(&self, out: &mut [u8]) -> Result<(), $crate::prm::FieldError> {
                <$ty>::encode(self, out)
            }
        }

        impl $ty {
            /// The structure as bytes, reserved bits zero; fails if a member is wider than
            /// its field.
            pub fn to_bytes(&self) -> Result<[u8; $size], $crate::prm::FieldError> {
                let mut bytes = [0u8; $size];
                let mut v = $crate::prm::ViewMut::<$ty>::new(&mut bytes)?;
                $( v.$set(self.$get)?; )+
                Ok(bytes)
            }

            /// Write the structure into the first bytes of `out`, reserved bits zero. On error
            /// `out` is left untouched.
            pub fn encode(&self, out: &mut [u8]) -> Result<(), $crate::prm::FieldError> {
                let len = out.len();
                let short = $crate::prm::FieldError::TooShort { layout: $name, need: $size, len };
                let head = out.get_mut(..$size).ok_or(short)?;
                head.copy_from_slice(&self.to_bytes()?);
                Ok(())
            }

            /// Read the structure from the first bytes of `buf`; reserved bits are ignored.
            pub fn decode(buf: &[u8]) -> Result<Self, $crate::prm::FieldError> {
                let v = $crate::prm::View::<$ty>::new(buf)?;
                Ok(Self { $( $get: v.$get(), )+ })
            }
        }
    };
}
pub(crate) use layout;
