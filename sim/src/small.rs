//! [`SmallVec`]: a vector that holds its first `N` items in place and moves to the heap only
//! beyond them. The data path builds short lists per work request (gather lists, translated
//! ranges, the parts of a message); kept in place they cost no allocation.

use std::fmt;

/// Up to `N` items in place, all of them on the heap beyond that.
#[derive(Clone)]
pub struct SmallVec<T, const N: usize> {
    /// Items in `inline` while `heap` is empty.
    len: usize,
    inline: [T; N],
    /// Every item, once there were more than `N`.
    heap: Vec<T>,
}

impl<T: Default, const N: usize> Default for SmallVec<T, N> {
    fn default() -> Self {
        SmallVec { len: 0, inline: std::array::from_fn(|_| T::default()), heap: Vec::new() }
    }
}

impl<T: Default, const N: usize> SmallVec<T, N> {
    /// An empty vector.
    pub fn new() -> Self {
        Self::default()
    }

    /// Append `v`.
    #[inline]
    pub fn push(&mut self, v: T) {
        if !self.heap.is_empty() {
            self.heap.push(v);
        } else if let Some(slot) = self.inline.get_mut(self.len) {
            *slot = v;
            self.len += 1;
        } else {
            self.heap.reserve(N + 1);
            self.heap.extend(self.inline.iter_mut().map(std::mem::take));
            self.heap.push(v);
            self.len = 0;
        }
    }

    /// Append a default item and return it, to be filled in place.
    #[inline]
    pub fn push_default(&mut self) -> &mut T {
        if self.heap.is_empty() && self.len < N {
            // Slots past `len` always hold a default item (see `clear` and the move to the heap).
            self.len += 1;
            return &mut self.inline[self.len - 1];
        }
        self.push(T::default());
        let last = self.as_mut_slice().len() - 1;
        &mut self.as_mut_slice()[last]
    }

    /// Remove every item (a heap buffer is kept for reuse).
    pub fn clear(&mut self) {
        for v in &mut self.inline[..self.len] {
            *v = T::default();
        }
        self.len = 0;
        self.heap.clear();
    }
}

impl<T, const N: usize> SmallVec<T, N> {
    /// The items.
    #[inline]
    pub fn as_slice(&self) -> &[T] {
        if self.heap.is_empty() { &self.inline[..self.len] } else { &self.heap }
    }

    /// The items, mutably.
    #[inline]
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        if self.heap.is_empty() { &mut self.inline[..self.len] } else { &mut self.heap }
    }
}

impl<T, const N: usize> std::ops::Deref for SmallVec<T, N> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        self.as_slice()
    }
}

impl<T, const N: usize> std::ops::DerefMut for SmallVec<T, N> {
    fn deref_mut(&mut self) -> &mut [T] {
        self.as_mut_slice()
    }
}

impl<'a, T, const N: usize> IntoIterator for &'a SmallVec<T, N> {
    type Item = &'a T;
    type IntoIter = std::slice::Iter<'a, T>;
    fn into_iter(self) -> Self::IntoIter {
        self.as_slice().iter()
    }
}

impl<T: Default, const N: usize> Extend<T> for SmallVec<T, N> {
    fn extend<I: IntoIterator<Item = T>>(&mut self, iter: I) {
        for v in iter {
            self.push(v);
        }
    }
}

impl<T: Default, const N: usize> FromIterator<T> for SmallVec<T, N> {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        let mut v = Self::new();
        v.extend(iter);
        v
    }
}

impl<T: Default, const N: usize> From<Vec<T>> for SmallVec<T, N> {
    fn from(v: Vec<T>) -> Self {
        v.into_iter().collect()
    }
}

impl<T: PartialEq, const N: usize> PartialEq for SmallVec<T, N> {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl<T: Eq, const N: usize> Eq for SmallVec<T, N> {}

impl<T: fmt::Debug, const N: usize> fmt::Debug for SmallVec<T, N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.as_slice().fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_stay_in_place_up_to_n_then_all_move_to_the_heap_in_order() {
        let mut v: SmallVec<u32, 2> = SmallVec::new();
        v.push(1);
        v.push(2);
        assert!(v.heap.is_empty());
        assert_eq!(v.as_slice(), &[1, 2]);
        v.push(3);
        assert_eq!(v.heap, vec![1, 2, 3]);
        assert_eq!(&*v, &[1, 2, 3]);
        v.as_mut_slice()[0] = 9;
        assert_eq!(v, [9, 2, 3].into_iter().collect());
        v.clear();
        assert!(v.is_empty());
        v.push(4);
        assert_eq!(v.as_slice(), &[4]);
        *v.push_default() = 5;
        assert_eq!(v.as_slice(), &[4, 5]);
        assert_eq!(*v.push_default(), 0, "a fresh default, even past the place for two");
        assert_eq!(v.as_slice(), &[4, 5, 0]);
        assert_eq!(format!("{v:?}"), "[4, 5, 0]");
    }
}
