//! Values the host hands to steps and plain tools: clients, configuration, pools.
//!
//! Workflow bodies cannot read them: a body must replay identically, and configuration may change
//! between a run's start and its replay after a restart. Read state in a step and pass on what the
//! body needs.

use std::any::{Any, TypeId, type_name};
use std::collections::HashMap;
use std::sync::Arc;

/// A map from type to one shared value of that type: what `RuntimeBuilder::state` gives steps.
#[derive(Clone, Default)]
pub struct State(HashMap<TypeId, Arc<dyn Any + Send + Sync>>);

/// No value of the type asked for was given to the runtime.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the runtime has no state of type `{type_name}`; give it with Runtime::builder().state(..)")]
pub struct MissingState {
    /// The type asked for.
    pub type_name: &'static str,
}

impl State {
    /// Stores `value`, replacing any earlier value of its type.
    pub fn insert<T: Send + Sync + 'static>(&mut self, value: T) {
        self.0.insert(TypeId::of::<T>(), Arc::new(value));
    }

    /// The value of type `T`, or an error saying how to provide one.
    pub fn get<T: Send + Sync + 'static>(&self) -> Result<Arc<T>, MissingState> {
        let value = self.0.get(&TypeId::of::<T>()).cloned().ok_or(MissingState { type_name: type_name::<T>() })?;
        Ok(value.downcast::<T>().expect("values are stored under their own type id"))
    }
}

impl std::fmt::Debug for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("State").field("values", &self.0.len()).finish()
    }
}
