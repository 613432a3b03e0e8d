pub mod bench;
pub mod check;
pub mod explain;
pub mod layout;
pub mod lower;
pub mod print;
pub mod run;
pub mod sim;
