//! tirx-script (in progress)
