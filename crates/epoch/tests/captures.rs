//! Rules checked against real captures (vectors/*/bus/index.json, phase pause-failover):
//! a resumed old primary claims its former slots with its old configEpoch; a node that knows
//! the new owner answers with one UPDATE whose body is exactly the captured one, and the old
//! primary, applying that UPDATE, becomes a replica of the new owner (captured roles.json).

use ferrocluster_epoch::*;
use ferrocluster_slot::{Slot, SlotSet};
use ferrocluster_topology::{ConfigEpoch, Millis, Node, NodeFlags, NodeId, ShardId, Topology};
use serde_json::Value;

const T0: Millis = Millis(1_700_000_000_000);

fn msg<'a>(index: &'a Value, file: &str) -> &'a Value {
    index["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["file"] == file)
        .unwrap_or_else(|| panic!("{file} missing from the index"))
}

fn slot_set(v: &Value) -> SlotSet {
    let mut s = SlotSet::new();
    for r in v.as_array().unwrap() {
        let (a, b) = (r[0].as_u64().unwrap(), r[1].as_u64().unwrap());
        for n in a..=b {
            s.insert(Slot::new(u16::try_from(n).unwrap()).unwrap());
        }
    }
    s
}

fn nid(v: &Value) -> NodeId {
    NodeId::parse(v.as_str().unwrap()).unwrap()
}

fn primary(id: NodeId, shard: ShardId, epoch: u64) -> Node {
    let mut n = Node::new(id, shard, T0);
    n.flags = NodeFlags::PRIMARY;
    n.config_epoch = ConfigEpoch(epoch);
    n
}

#[test]
fn stale_claim_gets_the_captured_update_and_the_old_primary_follows() {
    for flavor in ["valkey-8.0", "redis-7.0"] {
        let index = ferrocluster_testvectors::read_json(format!("{flavor}/bus/index.json"));
        let update = msg(&index, "update-01.bin");
        let body = &update["body"];
        let (new_owner, new_epoch, owned) = (
            nid(&body["nodename"]),
            body["configEpoch"].as_u64().unwrap(),
            slot_set(&body["slots"]),
        );
        // The stale claim: the resumed old primary's PING still claiming those slots.
        let stale = index["messages"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| {
                m["phase"] == "pause-failover"
                    && m["type_name"] == "ping"
                    && m["slaveof"].is_null()
                    && slot_set(&m["myslots"]) == owned
            })
            .expect("the old primary's stale PING");
        let old = nid(&stale["sender"]);
        let old_epoch = stale["configEpoch"].as_u64().unwrap();
        assert!(old_epoch < new_epoch);
        let shard = ShardId::parse(&"7".repeat(40)).unwrap();

        // Observer: the UPDATE's sender, knowing the new owner with the new epoch.
        let observer = nid(&update["sender"]);
        let mut t = Topology::new(primary(
            observer,
            ShardId::parse(&"1".repeat(40)).unwrap(),
            0,
        ));
        t.add_node(primary(new_owner, shard, new_epoch)).unwrap();
        t.add_node(primary(old, shard, old_epoch)).unwrap();
        for s in owned.iter() {
            t.set_slot_owner(s, Some(new_owner)).unwrap();
        }
        let mut e = Epoch::new();
        let mut out = Vec::new();
        let claim = PingClaims {
            sender: old,
            role: ClaimedRole::Primary,
            config_epoch: ConfigEpoch(old_epoch),
            slots: &owned,
        };
        let prior = PriorRole::of(&t, &old);
        e.handle_ping_claims(&mut t, &EpochConfig::default(), &claim, prior, &mut out);
        assert_eq!(
            out,
            vec![EpochEffect::Send {
                to: Target::Node(old),
                message: EpochMessage::Update {
                    node: new_owner,
                    config_epoch: ConfigEpoch(new_epoch),
                    slots: Box::new(owned.clone())
                },
                after_persist: false,
            }],
            "{flavor}"
        );
        assert!(owned.iter().all(|s| t.slot_owner(s) == Some(&new_owner)));

        // The old primary applies the UPDATE: loses every slot, follows the new owner (same
        // shard: partial sync), as roles.json after the episode shows.
        let mut t = Topology::new(primary(old, shard, old_epoch));
        for s in owned.iter() {
            t.set_slot_owner(s, Some(old)).unwrap();
        }
        let mut n = Node::new(new_owner, shard, T0);
        n.flags = NodeFlags::REPLICA;
        t.add_node(n).unwrap();
        t.set_primary(&new_owner, old).unwrap();
        let mut out = Vec::new();
        assert!(e.handle_update(
            &mut t,
            &EpochConfig::default(),
            &new_owner,
            ConfigEpoch(new_epoch),
            &owned,
            &mut out
        ));
        assert_eq!(t.myself().primary, Some(new_owner));
        assert!(out.iter().any(|x| matches!(x, EpochEffect::BecomeReplica { primary, full_sync: false, .. } if *primary == new_owner)));
        let roles = ferrocluster_testvectors::read_json(format!(
            "{flavor}/text/nodes-conf/after-pause-failover/roles.json"
        ));
        let old_role = roles
            .as_object()
            .unwrap()
            .values()
            .find(|r| r["id"] == old.as_str())
            .unwrap();
        assert_eq!(old_role["role"], "slave", "{flavor}");
    }
}

#[test]
fn captured_automatic_election_epochs() {
    // kill-failover: the replica's AUTH_REQUEST carries currentEpoch N (its bump), the voter's
    // ACK the same N, and the promoted replica's PONG claims configEpoch N.
    for flavor in ["valkey-8.0", "redis-7.0"] {
        let index = ferrocluster_testvectors::read_json(format!("{flavor}/bus/index.json"));
        let req = msg(&index, "failover_auth_request-02.bin");
        let ack = msg(&index, "failover_auth_ack-02.bin");
        let n = req["currentEpoch"].as_u64().unwrap();
        assert_eq!(ack["currentEpoch"].as_u64().unwrap(), n);
        // Voter model: myself = the ACK sender, a voting primary with its captured epoch and
        // slots; the requester's primary is FAIL.
        let voter = nid(&ack["sender"]);
        let requester = nid(&req["sender"]);
        let failed = nid(&req["slaveof"]);
        let shard = |c: &str| ShardId::parse(&c.repeat(40)).unwrap();
        let mut t = Topology::new(primary(
            voter,
            shard("1"),
            ack["configEpoch"].as_u64().unwrap(),
        ));
        for s in slot_set(&ack["myslots"]).iter() {
            t.set_slot_owner(s, Some(voter)).unwrap();
        }
        let req_slots = slot_set(&req["myslots"]);
        let mut f = primary(failed, shard("2"), req["configEpoch"].as_u64().unwrap());
        f.flags.insert(NodeFlags::FAIL);
        t.add_node(f).unwrap();
        for s in req_slots.iter() {
            t.set_slot_owner(s, Some(failed)).unwrap();
        }
        let mut r = Node::new(requester, shard("2"), T0);
        r.flags = NodeFlags::REPLICA;
        t.add_node(r).unwrap();
        t.set_primary(&requester, failed).unwrap();
        t.current_epoch = ferrocluster_topology::CurrentEpoch(n); // §8 step 4
        let a = AuthRequest {
            requester,
            current_epoch: ferrocluster_topology::CurrentEpoch(n),
            config_epoch: ConfigEpoch(req["configEpoch"].as_u64().unwrap()),
            slots: &req_slots,
            force_ack: req["mflags"][0].as_u64().unwrap() & 0x02 != 0,
        };
        let mut out = Vec::new();
        let o = Epoch::new().handle_auth_request(&mut t, &a, &mut out);
        assert_eq!(
            o,
            VoteOutcome::Granted(ferrocluster_topology::CurrentEpoch(n)),
            "{flavor}"
        );
        assert_eq!(t.last_vote_epoch.get(), n);
        let promoted_pong = index["messages"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| {
                m["phase"] == "kill-failover"
                    && m["type_name"] == "pong"
                    && m["sender"] == req["sender"]
                    && m["slaveof"].is_null()
            })
            .expect("the promoted replica's PONG");
        assert_eq!(
            promoted_pong["configEpoch"].as_u64().unwrap(),
            n,
            "{flavor}"
        );
    }
}
