//! The PostgreSQL store's tables. Integers are `BIGINT`, reals `DOUBLE PRECISION`, bytes
//! `BYTEA`, so every value is one of [`super::Value`]'s on both backends.

/// The lease tables (`store/lease.rs`, `store/queue.rs`, `store/port_cuts.rs`), as SQLite's
/// migrations 15 and 16 have them, and `device_keys`: each device's advisory-lock key.
pub const PG_LEASE_TABLES: &str = "
    CREATE TABLE IF NOT EXISTS device_keys (
        device      TEXT PRIMARY KEY,
        key         BIGSERIAL NOT NULL UNIQUE
    );
    CREATE TABLE IF NOT EXISTS device_leases (
        device      TEXT PRIMARY KEY,
        purpose     TEXT NOT NULL,
        campaign    TEXT,
        host        TEXT NOT NULL,
        pid         BIGINT NOT NULL,
        pid_start   BIGINT,
        since       TEXT NOT NULL,
        runbook     TEXT,
        priority    BIGINT NOT NULL DEFAULT 0,
        expect_s    DOUBLE PRECISION
    );
    CREATE TABLE IF NOT EXISTS device_queue (
        ticket      BIGSERIAL PRIMARY KEY,
        device      TEXT NOT NULL,
        priority    BIGINT NOT NULL,
        purpose     TEXT NOT NULL,
        campaign    TEXT,
        runbook     TEXT,
        host        TEXT NOT NULL,
        pid         BIGINT NOT NULL,
        pid_start   BIGINT,
        since       TEXT NOT NULL,
        expect_s    DOUBLE PRECISION,
        token       TEXT NOT NULL
    );
    CREATE INDEX IF NOT EXISTS device_queue_order ON device_queue (device, priority DESC, ticket);
    CREATE TABLE IF NOT EXISTS port_cuts (
        device      TEXT PRIMARY KEY,
        port        TEXT NOT NULL,
        since       TEXT NOT NULL
    );
";
