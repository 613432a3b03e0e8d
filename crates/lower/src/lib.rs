//! tirx-lower (in progress)
