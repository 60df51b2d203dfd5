//! The nodes of a simulated world by role ([`Node`]: `w1`.. `wN`, `client`, `sweeper`,
//! `operator`, `zombie`, `usurper`, `admin`, and the supervisor's `world`), and what a scenario's
//! `nodes` may aim a fault at ([`NodeTarget`]). History rows keep node labels as text (`w2.3`, the
//! oracle is shared with the soak, whose nodes differ); the simulator converts at that boundary.

use std::fmt;

use serde::Deserialize;
use serde::de::Error as _;

use fencesim_oracle::history::Role;

/// A node of a world, named as its history rows name it (without the incarnation).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Node {
    /// Queue worker `wN`, from 1.
    Worker(u32),
    /// Starts, resolves, cancels and recreates the runs.
    Client,
    /// The retention sweeper (a worker that only deletes settled runs).
    Sweeper,
    /// Runs `audit --repair` now and then.
    Operator,
    /// The superseded holder that probes every write surface with its dead lease.
    Zombie,
    /// The connection that attempts mid-call takeovers.
    Usurper,
    /// The administrator whose unleased deletes purge runs (its rows carry [`Role::Admin`]).
    Admin,
    /// The supervisor: its rows are notes, clock jumps and graceful restarts.
    World,
}

impl Node {
    /// The nodes that are not workers, in the order a timeline shows their lanes.
    pub const OTHERS: [Node; 7] =
        [Node::Sweeper, Node::Client, Node::Operator, Node::Usurper, Node::Zombie, Node::World, Node::Admin];

    /// The node `name` names (`w3`, `client`, ...), if any.
    pub fn parse(name: &str) -> Option<Node> {
        if let Some(digits) = name.strip_prefix('w')
            && digits.bytes().next().is_some_and(|b| b.is_ascii_digit())
        {
            // `w01`, `w0` and `w+1` are no worker's name: a worker's is exactly `w{i}`, from 1.
            let canonical = digits.bytes().all(|b| b.is_ascii_digit()) && !digits.starts_with('0');
            return digits.parse().ok().filter(|_| canonical).map(Node::Worker);
        }
        Node::OTHERS.into_iter().find(|n| n.name() == Some(name))
    }

    /// The node a history label (`w2.3`, `client.1`, `usurper`) belongs to.
    pub fn of_label(label: &str) -> Option<Node> {
        Node::parse(label.split('.').next().unwrap_or_default())
    }

    /// The name of a node that is not a worker.
    fn name(self) -> Option<&'static str> {
        match self {
            Node::Worker(_) => None,
            Node::Client => Some("client"),
            Node::Sweeper => Some("sweeper"),
            Node::Operator => Some("operator"),
            Node::Zombie => Some("zombie"),
            Node::Usurper => Some("usurper"),
            Node::Admin => Some("admin"),
            Node::World => Some("world"),
        }
    }
}

impl Node {
    /// What the node is to the oracle.
    pub fn role(self) -> Role {
        match self {
            Node::Worker(_) => Role::Worker,
            Node::Client => Role::Client,
            Node::Sweeper => Role::Sweeper,
            Node::Operator => Role::Operator,
            Node::Admin => Role::Admin,
            Node::Zombie | Node::Usurper | Node::World => Role::Harness,
        }
    }
}

/// The role of a world's history label (`w2.3`, `client.1`, `admin`): a world labels every row
/// with one of its nodes, so a label no node owns is a harness bug and stops the world.
pub fn role_of_label(label: &str) -> Role {
    Node::of_label(label)
        .map(Node::role)
        .unwrap_or_else(|| panic!("history label {label:?} names no node of the world"))
}

impl fmt::Display for Node {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Node::Worker(i) => f.pad(&format!("w{i}")),
            other => f.pad(other.name().unwrap_or_default()),
        }
    }
}

/// One entry of a fault kind's `nodes` in a scenario: every node the fault can hit (`any`), every
/// queue worker (`worker`), or one node (`w1`, `client`, `sweeper`, `operator`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NodeTarget {
    Any,
    Workers,
    Node(Node),
}

impl NodeTarget {
    /// The entry `name` names; an unknown one is refused with what is known.
    pub fn parse(name: &str) -> Result<NodeTarget, String> {
        match name {
            "any" => Ok(NodeTarget::Any),
            "worker" => Ok(NodeTarget::Workers),
            _ => match Node::parse(name) {
                Some(node @ (Node::Worker(_) | Node::Client | Node::Sweeper | Node::Operator)) => {
                    Ok(NodeTarget::Node(node))
                }
                Some(Node::Zombie | Node::Usurper | Node::Admin | Node::World) | None => {
                    Err(format!("unknown node '{name}' (known: any, worker, w1, w2, ..., client, sweeper, operator)"))
                }
            },
        }
    }

    /// Whether a fault aimed here hits `node`.
    pub fn hits(self, node: Node) -> bool {
        match self {
            NodeTarget::Any => true,
            NodeTarget::Workers => matches!(node, Node::Worker(_)),
            NodeTarget::Node(n) => n == node,
        }
    }
}

impl fmt::Display for NodeTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NodeTarget::Any => f.pad("any"),
            NodeTarget::Workers => f.pad("worker"),
            NodeTarget::Node(node) => node.fmt(f),
        }
    }
}

impl<'de> Deserialize<'de> for NodeTarget {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        NodeTarget::parse(&String::deserialize(d)?).map_err(D::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_node_round_trips_through_its_name() {
        let nodes = [Node::Worker(1), Node::Worker(2), Node::Worker(10)].into_iter().chain(Node::OTHERS);
        for node in nodes {
            assert_eq!(Node::parse(&node.to_string()), Some(node), "{node}");
            assert_eq!(Node::of_label(&format!("{node}.3")), Some(node), "{node}");
        }
        assert_eq!(Node::Admin.role(), Role::Admin);
        for bad in ["w0", "w01", "w", "wx", "Client", "forger", ""] {
            assert_eq!(Node::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn targets_parse_their_names_and_refuse_the_rest() {
        for name in ["any", "worker", "w1", "w12", "client", "sweeper", "operator"] {
            assert_eq!(NodeTarget::parse(name).map(|t| t.to_string()), Ok(name.to_owned()));
        }
        for bad in ["zombie", "usurper", "admin", "world", "w0", "workers"] {
            let e = NodeTarget::parse(bad).expect_err(bad);
            assert!(e.starts_with(&format!("unknown node '{bad}' (known: any, worker, w1, ")), "{e}");
        }
        assert!(NodeTarget::Workers.hits(Node::Worker(7)) && !NodeTarget::Workers.hits(Node::Sweeper));
        assert!(NodeTarget::Node(Node::Worker(2)).hits(Node::Worker(2)));
        assert!(!NodeTarget::Node(Node::Worker(2)).hits(Node::Worker(3)));
        assert!(NodeTarget::Any.hits(Node::Client));
    }
}
