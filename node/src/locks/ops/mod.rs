//! The lock operations, one file each: what each one is (its fields), what
//! it checks, the command it proposes and what the reply means. Each runs
//! through [`Locks::run`](super::Locks::run), which does the steps they
//! share (see `pipeline.rs`).

pub mod acquire;
pub mod acquire_all;
pub mod campaign;
pub mod cancel_wait;
pub mod close_session;
pub mod create_session;
pub mod define_limit;
pub mod delete_limit;
pub mod force_release;
pub mod keep_alive;
pub mod proclaim;
pub mod release;
pub mod resign;
pub mod resize;
pub mod return_tokens;
pub mod take;
