//! tirx-sim (in progress)
