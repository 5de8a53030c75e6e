//! The transports: stdio (one session) and streamable HTTP (many).

pub(crate) mod http;
pub(crate) mod lines;
pub(crate) mod stdio;
