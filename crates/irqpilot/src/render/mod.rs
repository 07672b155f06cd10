//! Text rendering shared by the commands: human-friendly numbers, aligned tables, and the
//! status report's text.

pub mod human;
pub mod status;
pub mod table;
