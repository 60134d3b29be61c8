//! `lab store copy FROM TO`: every campaign of one store into another, SQLite into
//! PostgreSQL or back, with nothing lost (each campaign's report reads the same).
//!
//! Each campaign is copied in one transaction on TO, so a copy cut short (Ctrl-C, a kill,
//! a lost connection) leaves whole campaigns only, and running it again copies those not
//! yet there: a campaign already in TO with as many trials, attempts and measurements is
//! skipped, one with other contents is refused. The rows keyed by schedule, device or
//! alert (slots, findings, alerts, battery readings, device status, ports left off) follow
//! in one more transaction, each row added only where TO has none with its key. Leases and
//! the queue are not copied: they belong to the processes that hold them.
//!
//! Measurement and series ids are kept, shifted past TO's newest, so the id ranges an
//! attempt's `attempt_report` row holds stay true by the same shift.

use std::ops::ControlFlow;

use super::backend::{DbError, Dialect, Row, Value, read_all, vals};
use super::error::StoreError;
use super::store::Store;

/// Rows per multi-row `INSERT` (9 columns: well under both servers' parameter limits).
const CHUNK: usize = 1000;

/// Where a copy is.
#[derive(Debug, Clone, PartialEq)]
pub enum CopyProgress {
    /// Campaign `index` of `total` is in TO now (`rows` rows), or was already (`skipped`).
    Campaign { id: String, index: usize, total: usize, rows: u64, skipped: bool },
    /// The schedule's, devices' and alerts' rows: `rows` added.
    Rest { rows: u64 },
}

/// What a copy did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CopySummary {
    pub copied: usize,
    pub skipped: usize,
    pub rows: u64,
    /// Stopped by its caller after the campaign it was told of last.
    pub stopped: bool,
}

/// The tables of one campaign, in the order their foreign keys need.
const CAMPAIGN_TABLES: &[&str] = &[
    "campaigns",
    "trials",
    "attempts",
    "attestations",
    "measurements",
    "series",
    "attempt_report",
    "operator_steps",
    "campaign_summaries",
    "raw_files",
];

/// The other tables a copy carries, each with the columns that key a row (a row of TO
/// with the same key is kept).
const OTHER_TABLES: &[(&str, &[&str])] = &[
    ("schedules_seen", &["schedule"]),
    ("schedule_slots", &["schedule", "due_utc"]),
    ("schedule_findings", &["schedule", "due_utc", "model", "variant", "metric"]),
    ("schedule_alerts", &["schedule", "due_utc", "channel"]),
    ("battery_readings", &["device", "at", "source"]),
    ("device_status", &["device"]),
    ("port_cuts", &["device"]),
];

/// Columns whose value TO gives anew (ids nothing refers to).
fn generated(table: &str, column: &str) -> bool {
    column == "id" && matches!(table, "operator_steps" | "schedule_findings" | "battery_readings")
}

impl Store {
    /// Copies every campaign of this store, and the rows that go with them, into `to`.
    /// `progress` hears of each campaign as it is in `to`; `Break` stops the copy there
    /// (what is copied stays; copying again goes on from it).
    pub fn copy_into(
        &self,
        to: &Store,
        progress: &mut dyn FnMut(&CopyProgress) -> ControlFlow<()>,
    ) -> Result<CopySummary, StoreError> {
        let ids: Vec<String> =
            read_all(&self.db.call(|c| c.query("SELECT id FROM campaigns ORDER BY created_at, id", &[]))?)?;
        let mut summary = CopySummary::default();
        for (i, id) in ids.iter().enumerate() {
            let (rows, skipped) = self.copy_campaign(to, id)?;
            summary.rows += rows;
            if skipped {
                summary.skipped += 1;
            } else {
                summary.copied += 1;
            }
            let told = CopyProgress::Campaign { id: id.clone(), index: i + 1, total: ids.len(), rows, skipped };
            if progress(&told).is_break() {
                summary.stopped = true;
                return Ok(summary);
            }
        }
        let rows = self.copy_others(to)?;
        summary.rows += rows;
        let _ = progress(&CopyProgress::Rest { rows });
        Ok(summary)
    }

    /// One campaign into `to` in one transaction: (rows, already there).
    fn copy_campaign(&self, to: &Store, id: &str) -> Result<(u64, bool), StoreError> {
        let mine = counts(&self.db, id)?;
        if let Some(theirs) = counts_if_there(&to.db, id)? {
            if theirs == mine {
                return Ok((0, true));
            }
            return Err(StoreError::Internal(format!(
                "campaign {id} is in {} already with other contents ({theirs:?} trials, attempts and measurements \
                 there, {mine:?} here); fix: copy into a store without it",
                to.location(),
            )));
        }
        // Both transactions stay open across calls: the read one is one snapshot of FROM,
        // the write one makes the campaign appear in TO whole or not at all.
        self.db.call(|c| c.begin_read())?;
        let copied = self.copy_campaign_rows(to, id);
        let _ = self.db.call(|c| c.rollback());
        match copied {
            Ok(rows) => Ok((rows, false)),
            Err(e) => {
                let _ = to.db.call(|c| c.rollback());
                Err(e)
            }
        }
    }

    fn copy_campaign_rows(&self, to: &Store, id: &str) -> Result<u64, StoreError> {
        to.db.call(|c| {
            c.begin()?;
            if c.dialect() == Dialect::Postgres {
                // Recorders take turns on this lock so their id ranges stay whole; so does a copy.
                c.execute("SELECT pg_advisory_xact_lock(?1)", &vals![super::pg_record::RECORD_LOCK])?;
            }
            Ok(())
        })?;
        let (m, s) = (self.id_shift(to, "measurements", id)?, self.id_shift(to, "series", id)?);
        let mut rows = 0;
        for &table in CAMPAIGN_TABLES {
            let shifts: &[(&str, i64)] = match table {
                "measurements" => &[("id", m)],
                "series" => &[("id", s)],
                "attempt_report" => {
                    &[("measurements_from", m), ("measurements_to", m), ("series_from", s), ("series_to", s)]
                }
                _ => &[],
            };
            let key = if table == "campaigns" { "id" } else { "campaign" };
            rows += self.stream_table(to, table, key, id, shifts)?;
        }
        to.db.call(|c| {
            if c.dialect() == Dialect::Postgres {
                for t in ["measurements", "series", "operator_steps"] {
                    // The next id TO gives is past the ones copied in.
                    c.query(
                        &format!(
                            "SELECT setval(pg_get_serial_sequence('{t}', 'id'), max(id)) FROM {t} HAVING count(*) > 0"
                        ),
                        &[],
                    )?;
                }
            }
            c.commit()
        })?;
        Ok(rows)
    }

    /// How far campaign `id`'s ids of `table` move so that they follow TO's newest.
    fn id_shift(&self, to: &Store, table: &'static str, id: &str) -> Result<i64, StoreError> {
        let id = id.to_string();
        let first = self.db.call(move |c| {
            c.query_opt(&format!("SELECT min(id) FROM {table} WHERE campaign = ?1"), &vals![&id])?
                .map_or(Ok(None), |r| r.get::<Option<i64>>(0))
        })?;
        let last = to.db.call(move |c| {
            // On PostgreSQL, past the ids recorders have reserved too (`pg_record::reserve`):
            // those may not be committed yet.
            let sql = match c.dialect() {
                Dialect::Postgres => format!(
                    "SELECT GREATEST(max(id), pg_sequence_last_value(CAST(pg_get_serial_sequence('{table}', 'id') AS regclass)))
                     FROM {table}"
                ),
                _ => format!("SELECT max(id) FROM {table}"),
            };
            c.query_opt(&sql, &[])?.map_or(Ok(None), |r| r.get::<Option<i64>>(0))
        })?;
        Ok(first.map_or(0, |f| last.unwrap_or(0) + 1 - f))
    }

    /// The rows of `table` whose `key` is `id`, streamed into `to` a chunk at a time,
    /// with the `shifts` added to their columns; how many.
    fn stream_table(
        &self,
        to: &Store,
        table: &'static str,
        key: &'static str,
        id: &str,
        shifts: &[(&str, i64)],
    ) -> Result<u64, StoreError> {
        let columns = common_columns(self, to, table)?;
        let shifts: Vec<(usize, i64)> =
            shifts.iter().map(|(name, by)| Ok((position(&columns, name)?, *by))).collect::<Result<_, StoreError>>()?;
        let order = if columns.iter().any(|c| c == "id") { "ORDER BY id" } else { "" };
        let select = format!("SELECT {} FROM {table} WHERE {key} = ?1 {order}", columns.join(", "));
        let (to_db, id) = (to.db.clone(), id.to_string());
        let n = self.db.call(move |c| {
            let mut chunk: Vec<Row> = Vec::with_capacity(CHUNK);
            let mut n = 0u64;
            c.query_each(&select, &vals![&id], &mut |mut row| {
                for &(col, by) in &shifts {
                    if let Value::Int(v) = &mut row.0[col] {
                        *v += by;
                    }
                }
                chunk.push(row);
                n += 1;
                if chunk.len() == CHUNK {
                    insert(&to_db, table, &columns, std::mem::take(&mut chunk))?;
                }
                Ok(())
            })?;
            insert(&to_db, table, &columns, chunk)?;
            Ok(n)
        })?;
        Ok(n)
    }

    /// The tables kept by schedule, device or alert: each row of this store whose key TO
    /// has not, in one transaction; how many were added.
    fn copy_others(&self, to: &Store) -> Result<u64, StoreError> {
        let mut plan = Vec::new();
        for &(table, key) in OTHER_TABLES {
            let columns: Vec<String> =
                common_columns(self, to, table)?.into_iter().filter(|c| !generated(table, c)).collect();
            let rows = self.db.call({
                let select = format!("SELECT {} FROM {table}", columns.join(", "));
                move |c| c.query(&select, &[])
            })?;
            let key_at: Vec<usize> = key.iter().map(|k| position(&columns, k)).collect::<Result<_, _>>()?;
            plan.push((table, key, columns, key_at, rows));
        }
        let added = to.db.call(move |c| {
            c.transaction(|c| {
                let mut added = 0u64;
                for (table, key, columns, key_at, rows) in &plan {
                    let exists = format!(
                        "SELECT 1 FROM {table} WHERE {}",
                        key.iter()
                            .enumerate()
                            .map(|(i, k)| format!("{k} = ?{}", i + 1))
                            .collect::<Vec<_>>()
                            .join(" AND ")
                    );
                    let sql = insert_sql(table, columns, 1);
                    for row in rows {
                        let key_values: Vec<Value> = key_at.iter().map(|&i| row.0[i].clone()).collect();
                        if c.query_opt(&exists, &key_values)?.is_none() {
                            c.execute(&sql, &row.0)?;
                            added += 1;
                        }
                    }
                }
                Ok(added)
            })
        })?;
        Ok(added)
    }
}

/// (trials, attempts, measurements) of campaign `id`.
type Counts = (i64, i64, i64);

fn counts(db: &super::backend::Db, id: &str) -> Result<Counts, StoreError> {
    counts_if_there(db, id)?.ok_or_else(|| StoreError::NoCampaign(id.into()))
}

fn counts_if_there(db: &super::backend::Db, id: &str) -> Result<Option<Counts>, StoreError> {
    let id = id.to_string();
    Ok(db.call(move |c| {
        if c.query_opt("SELECT 1 FROM campaigns WHERE id = ?1", &vals![&id])?.is_none() {
            return Ok(None);
        }
        let row = c
            .query_opt(
                "SELECT (SELECT count(*) FROM trials WHERE campaign = ?1), (SELECT count(*) FROM attempts WHERE campaign = ?1),
                        (SELECT count(*) FROM measurements WHERE campaign = ?1)",
                &vals![&id],
            )?
            .ok_or_else(|| DbError::Type("no counts".into()))?;
        Ok(Some(row.read()?))
    })?)
}

/// The columns of `table`, in TO's order, that both stores have (PostgreSQL names an id
/// SQLite keeps as its rowid).
fn common_columns(from: &Store, to: &Store, table: &str) -> Result<Vec<String>, StoreError> {
    let theirs = table_columns(&to.db, table)?;
    let mine = table_columns(&from.db, table)?;
    Ok(theirs.into_iter().filter(|c| mine.contains(c)).collect())
}

fn table_columns(db: &super::backend::Db, table: &str) -> Result<Vec<String>, StoreError> {
    let table = table.to_string();
    let rows = db.call(move |c| match c.dialect() {
        Dialect::Sqlite => c.query("SELECT name FROM pragma_table_info(?1) ORDER BY cid", &vals![&table]),
        Dialect::Postgres => c.query(
            "SELECT CAST(column_name AS TEXT) FROM information_schema.columns
             WHERE table_schema = current_schema() AND table_name = ?1 ORDER BY ordinal_position",
            &vals![&table],
        ),
    })?;
    Ok(read_all(&rows)?)
}

fn position(columns: &[String], name: &str) -> Result<usize, StoreError> {
    columns
        .iter()
        .position(|c| c == name)
        .ok_or_else(|| StoreError::Internal(format!("no column {name} among {columns:?}")))
}

fn insert_sql(table: &str, columns: &[String], rows: usize) -> String {
    let n = columns.len();
    let values: Vec<String> = (0..rows)
        .map(|r| format!("({})", (1..=n).map(|i| format!("?{}", r * n + i)).collect::<Vec<_>>().join(", ")))
        .collect();
    format!("INSERT INTO {table} ({}) VALUES {}", columns.join(", "), values.join(", "))
}

/// `rows` into `table` on `db`, in multi-row statements.
fn insert(db: &super::backend::Db, table: &str, columns: &[String], rows: Vec<Row>) -> Result<(), DbError> {
    if rows.is_empty() {
        return Ok(());
    }
    let sql = insert_sql(table, columns, rows.len());
    let params: Vec<Value> = rows.into_iter().flat_map(|r| r.0).collect();
    db.call(move |c| c.execute(&sql, &params)).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::columns::tests::{fill, varied};
    use crate::store::findings::tests::finding;
    use crate::store::{AlertRow, AlertState, BatteryReadingRow, Claimant, DeviceStatusRow, NewStep};
    use crate::testing::fixture;

    /// A store with two campaigns (every kind of attempt row: series, attestations, a moved
    /// trial), summaries, an operator step, and a schedule's, devices' and alerts' rows.
    fn varied_store(s: &Store) {
        let (record, trials, attempts) = varied();
        fill(s, &record, &trials, &attempts, 2);
        let move_ = crate::store::TrialMove { trial_idx: 6, to_device: "pixel-1".into(), device_order: 9 };
        s.move_trials(&record.id, &[move_]).unwrap();
        let data = fixture::records("c1");
        fill(s, &data.campaign, &data.trials, &data.attempts, data.plan.max_attempts);
        s.finish_campaign("c1", crate::store::CampaignStatus::Done, "2026-01-01T00:00:00Z", Some("a note"), None)
            .unwrap();
        let row = crate::store::summary_row_fixture("c1", "control", "cpu_pct", &[1.0, 2.5, 3.25]);
        s.put_summaries("c1", &[row]).unwrap();
        s.ask_step(&NewStep {
            campaign: "c1".into(),
            device: "sim-iphone-1".into(),
            trial_key: None,
            attempt: None,
            step: "brightness".into(),
            when: "before-campaign".into(),
            text: "Set brightness to 50 %".into(),
            attest: vec!["brightness".into()],
            asked_at: "2026-01-01T00:00:00Z".into(),
            deadline: "2026-01-02T00:00:00Z".into(),
        })
        .unwrap();
        let by = Claimant { pid: 10, host: "h", at: "2026-03-29T01:00:05Z" };
        s.claim_slot(
            "weekly",
            "2026-03-29T01:00:00Z",
            Some("c1"),
            &by,
            &[("2026-03-22T01:00:00Z".into(), "down".into())],
        )
        .unwrap();
        s.schedule_first_seen("weekly", "2026-03-01T00:00:00Z").unwrap();
        s.insert_findings(&[finding("2026-03-29T01:00:00Z", "busy", "cpu_pct")]).unwrap();
        let alert = AlertRow {
            schedule: "weekly".into(),
            due_utc: "2026-03-29T01:00:00Z".into(),
            channel: "webhook".into(),
            target: "http://127.0.0.1:9/hook".into(),
            payload: "{}".into(),
            state: AlertState::Sending,
            tries: 1,
            response: None,
            error: Some("refused".into()),
            at: "t0".into(),
        };
        s.begin_alert(&alert).unwrap();
        for (at, pct) in
            [("2026-01-02T00:00:00Z", 50.0), ("2026-01-01T00:00:00Z", 70.0), ("2026-01-01T00:00:00Z", 69.5)]
        {
            let r = BatteryReadingRow {
                device: "pixel-1".into(),
                at: at.into(),
                battery_pct: Some(pct),
                health_pct: Some(91.0),
                cycle_count: Some(300),
                source: format!("dumpsys {pct}"),
            };
            s.add_battery_reading(&r).unwrap();
        }
        s.set_device_status(&DeviceStatusRow {
            device: "pixel-1".into(),
            state: "idle".into(),
            battery_pct: Some(50.0),
            campaign: Some("c1".into()),
            trial_key: None,
            phase: None,
            updated_at: "2026-01-02T00:00:00Z".into(),
        })
        .unwrap();
        s.set_port_cut("pixel-1", "1-1.4:2", "2026-01-02T00:00:00Z").unwrap();
    }

    /// Everything a report, `lab status`, `lab history` and the schedule read, for comparing stores.
    fn contents(s: &Store) -> String {
        contents_but(s, "")
    }

    /// [`contents`] without campaign `but`.
    fn contents_but(s: &Store, but: &str) -> String {
        let mut out = String::new();
        for c in s.campaigns().unwrap().into_iter().filter(|c| c.id != but) {
            let id = c.id.clone();
            let cols = s.read_columns(&id).unwrap();
            out += &format!(
                "{}\n{}\n{}\n{:?}\n{}\n{}\n",
                serde_json::to_string(&c).unwrap(),
                serde_json::to_string(&s.trials(&id).unwrap()).unwrap(),
                serde_json::to_string(&s.attempts(&id).unwrap()).unwrap(),
                (cols.attempts(), cols.m_value.iter().map(|v| v.to_bits()).collect::<Vec<_>>()),
                serde_json::to_string(&s.summaries(&id).unwrap()).unwrap(),
                serde_json::to_string(&s.pending_steps(Some(&id)).unwrap()).unwrap(),
            );
        }
        let findings: Vec<_> = s
            .findings_of_schedule("weekly")
            .unwrap()
            .into_iter()
            .map(|f| crate::store::FindingRow { id: 0, ..f })
            .collect();
        out += &format!(
            "{}\n{}\n{}\n{:?}\n{}\n{}\n{:?}\n",
            serde_json::to_string(&s.slots(None).unwrap()).unwrap(),
            serde_json::to_string(&findings).unwrap(),
            serde_json::to_string(&s.alerts_of_schedule("weekly").unwrap()).unwrap(),
            s.schedule_seen("weekly").unwrap(),
            serde_json::to_string(&s.battery_readings("pixel-1").unwrap()).unwrap(),
            serde_json::to_string(&s.device_statuses().unwrap()).unwrap(),
            s.port_cut("pixel-1").unwrap(),
        );
        out
    }

    fn copy(from: &Store, to: &Store) -> CopySummary {
        from.copy_into(to, &mut |_| ControlFlow::Continue(())).unwrap()
    }

    #[test]
    fn a_sqlite_store_copies_into_another_whole_and_a_second_copy_adds_nothing() {
        let (_a, from) = crate::testing::postgres::sqlite_store();
        let (_b, to) = crate::testing::postgres::sqlite_store();
        varied_store(&from);
        let want = contents(&from);
        assert!(want.contains("a note") && want.contains("dumpsys 69.5") && want.contains("1-1.4:2"), "{want}");
        let first = copy(&from, &to);
        assert_eq!((first.copied, first.skipped), (2, 0));
        assert_eq!(contents(&to), want);
        let again = copy(&from, &to);
        assert_eq!((again.copied, again.skipped, again.rows), (0, 2, 0));
        assert_eq!(contents(&to), want, "nothing twice");
    }

    #[test]
    fn a_copy_stopped_after_a_campaign_goes_on_from_there() {
        let (_a, from) = crate::testing::postgres::sqlite_store();
        let (_b, to) = crate::testing::postgres::sqlite_store();
        varied_store(&from);
        let stopped = from.copy_into(&to, &mut |_| ControlFlow::Break(())).unwrap();
        assert_eq!((stopped.copied, stopped.stopped), (1, true));
        assert_eq!(to.campaigns().unwrap().len(), 1);
        let rest = copy(&from, &to);
        assert_eq!((rest.copied, rest.skipped), (1, 1));
        assert_eq!(contents(&to), contents(&from));
    }

    #[test]
    fn a_campaign_of_the_same_id_with_other_contents_is_refused() {
        let (_a, from) = crate::testing::postgres::sqlite_store();
        let (_b, to) = crate::testing::postgres::sqlite_store();
        varied_store(&from);
        let data = fixture::records("c1");
        fill(&to, &data.campaign, &data.trials, &data.attempts[..2], data.plan.max_attempts);
        let e = from.copy_into(&to, &mut |_| ControlFlow::Continue(())).unwrap_err().to_string();
        assert!(e.contains("campaign c1 is in") && e.contains("other contents"), "{e}");
    }

    /// SQLite into PostgreSQL (that has a campaign of its own, so every id moves) and back
    /// into a new SQLite file: the same contents each time. A copy that fails inside a
    /// campaign leaves nothing of it, and the next one copies it whole.
    #[test_needs::needs(postgres)]
    #[test]
    fn sqlite_into_postgres_and_back_loses_nothing_and_a_failed_campaign_leaves_nothing() {
        let (_a, from) = crate::testing::postgres::sqlite_store();
        varied_store(&from);
        let want = contents(&from);
        let pg = crate::testing::postgres::store();
        let mut own = varied().0;
        own.id = "pg-own".into();
        let (_, trials, attempts) = varied();
        let attempts: Vec<_> = attempts
            .into_iter()
            .map(|mut a| {
                a.campaign = own.id.clone();
                a
            })
            .collect();
        fill(&pg, &own, &trials, &attempts, 2);
        let own_before = pg.read_columns("pg-own").unwrap();
        // The second campaign's report rows fail once, halfway through its copy.
        pg.db
            .call(|c| {
                c.batch(
                    "CREATE FUNCTION fail_once() RETURNS trigger AS $$ BEGIN
                         IF NEW.campaign = 'c1' THEN RAISE EXCEPTION 'the connection broke'; END IF; RETURN NEW;
                     END $$ LANGUAGE plpgsql;
                     CREATE TRIGGER fail_once BEFORE INSERT ON attempt_report FOR EACH ROW EXECUTE FUNCTION fail_once();",
                )
            })
            .unwrap();
        let e = from.copy_into(&pg, &mut |_| ControlFlow::Continue(())).unwrap_err().to_string();
        assert!(e.contains("the connection broke"), "{e}");
        let trials_of_c1 = pg.trials("c1").map(|t| t.len()).unwrap_or(0);
        assert_eq!(trials_of_c1, 0, "half a campaign was left");
        assert_eq!(pg.campaigns().unwrap().len(), 2, "the one before it stays");
        pg.db.call(|c| c.batch("DROP TRIGGER fail_once ON attempt_report")).unwrap();
        let rest = copy(&from, &pg);
        assert_eq!((rest.copied, rest.skipped), (1, 1));
        assert_eq!(contents_but(&pg, "pg-own"), want);
        assert_eq!(pg.read_columns("pg-own").unwrap(), own_before);
        let (_c, back) = crate::testing::postgres::sqlite_store();
        copy(&pg, &back);
        assert_eq!(contents_but(&back, "pg-own"), want);
        // New recordings on PostgreSQL still get fresh ids after the copied ones.
        let mut more = fixture::records("after").attempts;
        more.truncate(1);
        let data = fixture::records("after");
        fill(&pg, &data.campaign, &data.trials, &more, 2);
        assert_eq!(pg.attempts("after").unwrap().len(), 1);
    }
}
