//! The durable-run engine of fencesim over the store SPI: segments, ownership, checkpoints,
//! settle, the queue worker, retention, audit and reconcile (contracts sections 3 and 4). It lands
//! with the engine issue; until then the crate is empty so the workspace has its final shape and
//! its dependency rule (`engine -> store`) is fixed from the start.
