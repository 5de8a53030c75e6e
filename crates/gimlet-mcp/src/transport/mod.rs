//! The transports: stdio (one session) and, later, streamable HTTP (many).

pub(crate) mod stdio;
