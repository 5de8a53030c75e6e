//! Walking and searching trees for `grep` and `glob`, with ripgrep's own crates, in process.
//!
//! Both tools walk first (the `ignore` crate's walkers, with ripgrep's default filters:
//! `.gitignore`, `.ignore`, hidden files; a small tree on the calling thread, a large one in
//! parallel, [`walk::walk_files`]), sort what they found (most recently modified first,
//! then by path), and then work through that order, so that results and pages are stable and
//! the work stops once a page is full. Files are opened beneath their root's handle, never by
//! a path string, so nothing outside the roots is read or named.

pub(crate) mod ordered;
pub(crate) mod walk;
