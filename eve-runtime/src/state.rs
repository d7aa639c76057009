//! Values the host hands to steps and plain tools: clients, configuration, pools.
//!
//! Workflow bodies cannot read them: a body must replay identically, and configuration may change
//! between a run's start and its replay after a restart. Read state in a step and pass on what the
//! body needs.

use std::any::{Any, TypeId, type_name};
use std::collections::HashMap;
use std::sync::Arc;

/// A map from type to one shared value of that type.
#[derive(Clone, Default)]
pub(crate) struct State(HashMap<TypeId, Arc<dyn Any + Send + Sync>>);

impl State {
    /// Stores `value`, replacing any earlier value of its type.
    pub fn insert<T: Send + Sync + 'static>(&mut self, value: T) {
        self.0.insert(TypeId::of::<T>(), Arc::new(value));
    }

    /// The value of type `T`, or an error saying how to provide one.
    pub fn get<T: Send + Sync + 'static>(&self) -> Result<Arc<T>, String> {
        let missing = || {
            let name = type_name::<T>();
            format!("the runtime has no state of type `{name}`; give it with Runtime::builder().state(..)")
        };
        let value = self.0.get(&TypeId::of::<T>()).cloned().ok_or_else(missing)?;
        Ok(value.downcast::<T>().expect("values are stored under their own type id"))
    }
}

impl std::fmt::Debug for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("State").field("values", &self.0.len()).finish()
    }
}
