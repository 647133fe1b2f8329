//! The engine's asset API: the assets its adopted definitions name, with
//! their lineage and last materialization, and a delivery pass on
//! request. Deliveries themselves are the assets actor's
//! (`weir_actors::assets`).

use ractor::ActorRef;
use weir_actors::assets::view::{self, AssetView};
use weir_actors::assets::AssetsMsg;

use crate::{Engine, EngineError, CALL_TIMEOUT};

impl Engine {
    /// Every asset: who produces it, which graphs start on it, its last
    /// materialization and how many wait to be delivered. Read from the
    /// store; with no engine running, use
    /// [`weir_actors::assets::view::assets`].
    pub fn assets(&self) -> Result<Vec<AssetView>, EngineError> {
        Ok(view::assets(&self.store)?)
    }

    /// Delivers the pending materializations now; answers how many were
    /// delivered.
    pub async fn deliver_assets(&self) -> Result<usize, EngineError> {
        let a = self.assets_actor()?;
        ractor::call_t!(a, AssetsMsg::Pass, CALL_TIMEOUT.as_millis() as u64)
            .map_err(|e| self.call_err("assets", e))
    }

    /// Fault injection, for tests: while held, no materialization is
    /// delivered (each stays in the store), as if the engine stopped
    /// between a producer's success and its consumers' starts.
    pub fn hold_assets(&self, held: bool) -> Result<(), EngineError> {
        self.assets_actor()?
            .cast(AssetsMsg::Hold(held))
            .map_err(|e| self.call_err("assets", e))
    }

    fn assets_actor(&self) -> Result<ActorRef<AssetsMsg>, EngineError> {
        ActorRef::<AssetsMsg>::where_is(self.names.assets())
            .ok_or_else(|| EngineError::Stopped("the assets actor is not running".into()))
    }
}
