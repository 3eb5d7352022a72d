//! Errors of [`crate::ClusterNode`] operations. Whenever one is returned nothing changed.
//! (Refused CLUSTER commands are not errors of the API: they are error replies, with
//! Valkey's texts, from [`crate::ClusterNode::cluster_command`].)

use crate::ConfigError;
use ferrocluster_topology::ConfError;

/// Why a node could not be built or reconfigured (host misuse or bad input); the node is
/// unchanged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NodeError {
    /// The configuration or the capabilities are invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The saved nodes.conf could not be loaded (Valkey `clusterLoadConfig`); the error
    /// names the line and the reason.
    #[error(transparent)]
    NodesConf(#[from] ConfError),
}
