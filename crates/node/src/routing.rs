//! Request routing through the node: the command crate's [`route`] over the node's current
//! view (myself, slot owners, importing/migrating marks, cluster state, configuration), so
//! the host calls one function per keyed command (facts sheet §20).

use crate::{ClusterNode, PreferredEndpoint};
use ferrocluster_command::{
    route, ClientState, ClusterContext, CommandSpec, CommandTable, Dispatch, EndpointType,
    KeyPresence, Route, RoutingConfig,
};
use ferrocluster_topology::Topology;

impl ClusterNode {
    /// The routing configuration from [`crate::ClusterConfig`]
    /// (`cluster-allow-reads-when-down`, `cluster-allow-pubsubshard-when-down`,
    /// `cluster-preferred-endpoint-type`) and the host's database count
    /// ([`crate::Capabilities::databases`]).
    pub(crate) fn routing_config(&self) -> RoutingConfig {
        RoutingConfig {
            allow_reads_when_down: self.config.allow_reads_when_down,
            allow_pubsubshard_when_down: self.config.allow_pubsubshard_when_down,
            preferred_endpoint: match self.config.preferred_endpoint {
                PreferredEndpoint::Ip => EndpointType::Ip,
                PreferredEndpoint::Hostname => EndpointType::Hostname,
                PreferredEndpoint::UnknownEndpoint => EndpointType::UnknownEndpoint,
            },
            databases: self.caps.databases,
        }
    }

    /// The cluster as routing sees it now: the topology, whether the cluster state is `ok`
    /// (§10), the routing configuration (`cluster-allow-reads-when-down`,
    /// `cluster-allow-pubsubshard-when-down`, `cluster-preferred-endpoint-type`) and the
    /// host's database count.
    pub fn cluster_context(&self) -> ClusterContext<'_, Topology> {
        ClusterContext {
            view: &self.topo,
            state_ok: self.state.is_ok(),
            config: self.routing_config(),
        }
    }

    /// Routes one command (§20.3): `Ok(slot)` = serve it here, `Err` = the MOVED / ASK /
    /// TRYAGAIN / CROSSSLOT / CLUSTERDOWN error to send. TLS and IPv6 of the connection (for
    /// the redirect's port and address) come from `client`; key existence during a migration
    /// from `keys`. Nothing changes (the ASKING flag is consumed by
    /// [`ClusterNode::dispatch_client_command`]).
    pub fn route<A, K>(
        &self,
        spec: &CommandSpec,
        argv: &[A],
        client: &ClientState,
        keys: &K,
    ) -> Route
    where
        A: AsRef<[u8]>,
        K: KeyPresence + ?Sized,
    {
        route(spec, argv, client, &self.cluster_context(), keys)
    }

    /// The whole per-command sequence for one client command (table lookup and arity,
    /// routing, MULTI queueing, connection commands — SELECT over the host's
    /// [`crate::Capabilities::databases`] — and the one-shot ASKING flag):
    /// [`ClientState::handle_command`] over [`ClusterNode::cluster_context`].
    pub fn dispatch_client_command<A, K>(
        &self,
        client: &mut ClientState,
        argv: &[A],
        keys: &K,
    ) -> Dispatch
    where
        A: AsRef<[u8]>,
        K: KeyPresence + ?Sized,
    {
        client.handle_command(argv, &self.cluster_context(), keys)
    }

    /// [`ClusterNode::dispatch_client_command`] over the host's own command table (a
    /// database that registered its commands, their keys and flags, in a [`CommandTable`]:
    /// the `COMMAND` reply and routing then agree): the same sequence, with `table` for the
    /// lookup, the arity and the key positions ([`ClientState::handle_command_in`]). A
    /// command missing from `table` is refused with the unknown-command error.
    pub fn dispatch_client_command_in<H, A, K>(
        &self,
        table: &CommandTable<H>,
        client: &mut ClientState,
        argv: &[A],
        keys: &K,
    ) -> Dispatch
    where
        H: Copy,
        A: AsRef<[u8]>,
        K: KeyPresence + ?Sized,
    {
        client.handle_command_in(table, argv, &self.cluster_context(), keys)
    }
}
