//! tirx-cuda (in progress)
