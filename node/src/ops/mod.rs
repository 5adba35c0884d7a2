//! Running a node, as an operator sees it: the admin listener with its
//! probes ([`admin`]), the metrics it exports ([`metrics`]), the inspector page ([`ui`]) and the
//! reload of certificates and the auth file without a restart
//! ([`reload`]). These read the node and the lock service; nothing on a
//! request path depends on them.

pub mod admin;
pub mod metrics;
pub mod reload;
pub mod ui;
