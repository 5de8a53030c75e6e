//! Opening resolved paths on Windows (see the module docs when written).
