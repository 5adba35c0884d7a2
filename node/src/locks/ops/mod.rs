//! The lock operations, one file each: what each one is (its fields), what
//! it checks, the command it proposes and what the reply means. Each runs
//! through [`Locks::run`](super::Locks::run), which does the steps they
//! share (see `pipeline.rs`). An operation's file also says how the API
//! asks for it: the request message it parses and the response message it
//! builds ([`OpCall`](super::OpCall)), which both transports serve with no
//! line of their own. A new operation is its file and its lines here.

mod acquire;
pub use acquire::{Acquire, Acquired, Sequence};
mod acquire_all;
pub use acquire_all::{AcquireAll, AcquiredAll};
mod campaign;
pub use campaign::Campaign;
mod cancel_wait;
pub use cancel_wait::{CancelWait, Cancelled};
mod close_session;
pub use close_session::CloseSession;
mod create_session;
pub use create_session::CreateSession;
mod define_limit;
pub use define_limit::DefineLimit;
mod delete_limit;
pub use delete_limit::DeleteLimit;
mod downgrade;
pub use downgrade::{Downgrade, Downgraded};
mod force_release;
pub use force_release::{ForceRelease, ForceReleased};
mod keep_alive;
pub use keep_alive::KeepAlive;
mod proclaim;
pub use proclaim::Proclaim;
mod release;
pub use release::Release;
mod resign;
pub use resign::Resign;
mod resize;
pub use resize::Resize;
mod return_tokens;
pub use return_tokens::ReturnTokens;
mod take;
pub use take::{Take, Taken};
