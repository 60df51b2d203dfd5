//! The planted defects of both crates under one name space: what `--defect NAME` names, what a
//! scenario's `targets` list, what the kill matrix runs.

use std::fmt;

use fencesim_engine::{EngineDefect, EngineDefects};
use fencesim_store::{StoreDefect, StoreDefects};

/// A planted defect of either crate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Defect {
    Store(StoreDefect),
    Engine(EngineDefect),
}

impl Defect {
    /// Every defect: the store's, then the engine's.
    pub fn all() -> Vec<Defect> {
        StoreDefect::ALL
            .into_iter()
            .map(Defect::Store)
            .chain(EngineDefect::ALL.into_iter().map(Defect::Engine))
            .collect()
    }

    pub fn name(self) -> &'static str {
        match self {
            Defect::Store(d) => d.name(),
            Defect::Engine(d) => d.name(),
        }
    }

    pub fn story(self) -> &'static str {
        match self {
            Defect::Store(d) => d.story(),
            Defect::Engine(d) => d.story(),
        }
    }

    pub fn parse(name: &str) -> Result<Defect, String> {
        EngineDefect::parse(name)
            .map(Defect::Engine)
            .or_else(|| StoreDefect::parse(name).map(Defect::Store))
            .ok_or_else(|| format!("unknown defect '{name}' (valid: {})", defect_names()))
    }

    /// Split a list into the two crates' switch sets.
    pub fn split(defects: &[Defect]) -> (EngineDefects, StoreDefects) {
        let engine: Vec<EngineDefect> =
            defects.iter().filter_map(|d| if let Defect::Engine(e) = d { Some(*e) } else { None }).collect();
        let store: Vec<StoreDefect> =
            defects.iter().filter_map(|d| if let Defect::Store(s) = d { Some(*s) } else { None }).collect();
        (EngineDefects::of(&engine), StoreDefects::of(&store))
    }
}

impl fmt::Display for Defect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

pub fn defect_names() -> String {
    Defect::all().iter().map(|d| d.name()).collect::<Vec<_>>().join(", ")
}
