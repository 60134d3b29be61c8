//! Statistics: pure functions, each naming its formula and source.
