//! `ibv_rereg_mr` of ODP MRs (items 332–334).

use crate::case::Case;

pub(super) const CASES: &[Case] = &[];
