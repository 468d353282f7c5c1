//! Integration tests of the text tools (cat, grep, patch) through `vis::text`'s public API.

mod attacks;
mod bad_input;
mod cat;
mod faults;
mod fuzz;
mod grep;
mod oracle;
mod patch;
mod props;
mod python;
mod support;
