//! # tirx-layout
//!
//! (Design essay to be written with the operations.)

pub mod axis;
pub mod tile;

pub use axis::{Axis, ExecScope};
pub use tile::{ComposeLayout, Iter, Layout, Swizzle, TileLayout};
