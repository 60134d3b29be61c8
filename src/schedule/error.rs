//! What can stop schedule work.

#[derive(Debug, thiserror::Error)]
pub enum ScheduleError {
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    #[error("schedule {schedule}: {message}")]
    Cron { schedule: String, message: String },
    #[error("stored time `{0}` is not RFC 3339; fix: check the store's schedule_slots table")]
    Time(String),
    #[error("the wake-up timer: {0}")]
    Timer(String),
    /// A slot's campaign could not be reviewed at all (its stored records unreadable).
    #[error("review: {0}")]
    Review(String),
}
