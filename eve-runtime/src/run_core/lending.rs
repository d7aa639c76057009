//! A value behind a mutex that its owner's thread may borrow without locking for a while: the
//! run's state, which the driver lends to its thread while a step starts (see
//! [`RunCore::lend`](super::RunCore::lend)).
//!
//! The rule: while the value is lent, the mutex stays locked, so another thread that locks it
//! waits until the lending ends; on the lending thread, [`Lendable::lock`] takes the value from a
//! thread-local slot instead of the mutex. Nothing may await while the value is lent (the task
//! could move to another thread and leave the value behind), and a thread locks one value once at
//! a time, lent or not.
//!
//! Built with `--cfg eve_loom`, the mutex, the atomic and the thread-locals are loom's, and the
//! tests below check the rule over every interleaving of a lending thread (the driver and the body
//! it polls), a thread that locks the value (a delivery) and one that reads its signal bits and
//! then locks it (an abort watcher); one of them plants a bug in the lending and checks that the
//! model checker finds it. `scripts/test.sh` runs them.

use std::cell::Cell;
use std::ops::{Deref, DerefMut};

#[cfg(not(eve_loom))]
use std::sync::atomic::{AtomicU8, Ordering};
#[cfg(not(eve_loom))]
use std::sync::{Mutex, MutexGuard};
/// The thread-local slot type: std's, or loom's when model checking.
#[cfg(not(eve_loom))]
pub(crate) type Slot<T> = std::thread::LocalKey<Cell<T>>;

#[cfg(eve_loom)]
use loom::sync::atomic::{AtomicU8, Ordering};
#[cfg(eve_loom)]
use loom::sync::{Mutex, MutexGuard};
/// The thread-local slot type: std's, or loom's when model checking.
#[cfg(eve_loom)]
pub(crate) type Slot<T> = loom::thread::LocalKey<Cell<T>>;

/// Declares the thread-local slots a [`Lent`] type lends through: `$lent` holds the value lent to
/// the thread while no guard holds it, `$lender` the address of the [`Lendable`] it came from.
macro_rules! lending_slots {
    ($(#[$meta:meta])* $lent:ident, $lender:ident: $state:ty) => {
        #[cfg(not(eve_loom))]
        ::std::thread_local! {
            $(#[$meta])*
            static $lent: ::std::cell::Cell<Option<Box<$state>>> = const { ::std::cell::Cell::new(None) };
            static $lender: ::std::cell::Cell<usize> = const { ::std::cell::Cell::new(0) };
        }
        #[cfg(eve_loom)]
        ::loom::thread_local! {
            $(#[$meta])*
            static $lent: ::std::cell::Cell<Option<Box<$state>>> = ::std::cell::Cell::new(None);
            static $lender: ::std::cell::Cell<usize> = ::std::cell::Cell::new(0);
        }
    };
}
pub(crate) use lending_slots;

/// A type whose values a [`Lendable`] holds: its thread-local slots, and the bits that say what
/// a look at it would find.
pub(crate) trait Lent: Sized + 'static {
    /// The thread's slot for a value lent to it (see [`lending_slots!`]).
    fn lent() -> &'static Slot<Option<Box<Self>>>;
    /// The thread's slot for the address of the [`Lendable`] lending to it.
    fn lender() -> &'static Slot<usize>;
    /// What a look at the value would find, as bits: published each time a guard lets it go.
    fn signals(&self) -> u8;
}

/// A value behind a mutex, which its owner's thread may borrow: see the module documentation.
pub(crate) struct Lendable<T: Lent> {
    /// The value, in the mutex except while a [`Held`] holds it or it is lent to a thread;
    /// whoever has it away holds the mutex meanwhile.
    value: Mutex<Option<Box<T>>>,
    /// The [`Lent::signals`] of the value as its last holder left it, readable without the lock.
    signals: AtomicU8,
}

impl<T: Lent> Lendable<T> {
    pub fn new(value: T) -> Self {
        let signals = AtomicU8::new(value.signals());
        Lendable { value: Mutex::new(Some(Box::new(value))), signals }
    }

    /// The value's signal bits as its last holder left them.
    #[inline]
    pub fn signals(&self) -> u8 {
        self.signals.load(Ordering::Acquire)
    }

    /// Locks the value: takes it from the thread's slot if it is lent to this thread, else from
    /// the mutex, which the guard then holds locked.
    #[inline]
    pub fn lock(&self) -> Held<'_, T> {
        if T::lender().with(Cell::get) == self.address()
            && let Some(value) = T::lent().with(Cell::take)
        {
            return Held { value: std::mem::ManuallyDrop::new(Some(value)), mutex: None, signals: &self.signals };
        }
        self.lock_mutex()
    }

    /// [`Lendable::lock`] when the value is not lent to this thread.
    #[inline(never)]
    fn lock_mutex(&self) -> Held<'_, T> {
        let (guard, value) = self.take();
        Held { value: std::mem::ManuallyDrop::new(Some(value)), mutex: Some(guard), signals: &self.signals }
    }

    /// Locks the mutex and takes the value out of it, for a guard or a lending to hold.
    #[inline]
    fn take(&self) -> (MutexGuard<'_, Option<Box<T>>>, Box<T>) {
        let mut guard = self.value.lock().expect("a lendable's mutex is never poisoned: no code panics holding it");
        let value = guard.take().expect("a lent value is away from its mutex only while the mutex is held");
        (guard, value)
    }

    /// What names this value in the thread's lender slot.
    #[inline]
    fn address(&self) -> usize {
        std::ptr::from_ref(self).addr()
    }

    /// Lends the value to this thread until the returned lending drops: [`Lendable::lock`] on
    /// this thread then takes it without touching the mutex, which stays locked meanwhile, so
    /// other threads wait for the lending to end.
    pub fn lend(&self) -> Lending<'_, T> {
        debug_assert_ne!(T::lender().with(Cell::get), self.address(), "a value is lent once at a time");
        let (guard, value) = self.take();
        let lender = T::lender().with(|lender| lender.replace(self.address()));
        let previous = (lender, T::lent().with(|lent| lent.replace(Some(value))));
        Lending {
            guard: Some(guard),
            previous,
            #[cfg(eve_loom)]
            lendable: self,
        }
    }
}

/// A value locked. Letting it go publishes its signal bits first, while the lock is still held,
/// so no change to the value can be missed by a later look at them: every change goes through a
/// guard.
pub(crate) struct Held<'a, T: Lent> {
    /// Taken out of its home while the guard lives, and put back by `drop`, which leaves `None`
    /// (so there is nothing for the field's own drop to do).
    value: std::mem::ManuallyDrop<Option<Box<T>>>,
    /// The mutex, which the guard holds locked; `None` for a value taken from the thread's slot,
    /// where it goes back.
    mutex: Option<MutexGuard<'a, Option<Box<T>>>>,
    signals: &'a AtomicU8,
}

impl<T: Lent> Deref for Held<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        self.value.as_deref().expect("a guard holds its value until it drops")
    }
}

impl<T: Lent> DerefMut for Held<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        self.value.as_deref_mut().expect("a guard holds its value until it drops")
    }
}

impl<T: Lent> Drop for Held<'_, T> {
    #[inline]
    fn drop(&mut self) {
        let Some(value) = self.value.take() else { return };
        // A plain store, not a read-modify-write: only the holder of the lock writes the bits.
        self.signals.store(value.signals(), Ordering::Release);
        let stray = match &mut self.mutex {
            Some(guard) => guard.replace(value),
            None => T::lent().with(|lent| lent.replace(Some(value))),
        };
        if stray.is_some() {
            stray_value();
        }
    }
}

/// A value put back where another already was: a bug in the lending.
#[cold]
#[inline(never)]
fn stray_value() -> ! {
    unreachable!("a lent value has one place at a time")
}

/// A value lent to the thread: the mutex stays locked until this drops, and the value goes back
/// under it.
pub(crate) struct Lending<'a, T: Lent> {
    /// `Some` until `drop`, which puts the value back under it before letting the mutex go.
    guard: Option<MutexGuard<'a, Option<Box<T>>>>,
    previous: (usize, Option<Box<T>>),
    #[cfg(eve_loom)]
    lendable: &'a Lendable<T>,
}

impl<T: Lent> Drop for Lending<'_, T> {
    fn drop(&mut self) {
        let (lender, previous) = std::mem::take(&mut self.previous);
        T::lender().with(|slot| slot.set(lender));
        let lent = T::lent().with(|slot| slot.replace(previous));
        assert!(lent.is_some(), "a guard taken from a lent value drops before the lending ends");
        let mut guard = self.guard.take().expect("a lending ends once");
        #[cfg(eve_loom)]
        if PLANTED.load(std::sync::atomic::Ordering::Relaxed) {
            // The planted bug: the mutex let go for a moment before the value is back under it.
            drop(guard);
            guard = self.lendable.value.lock().expect("the planted bug's relock");
        }
        *guard = lent;
    }
}

/// Plants a bug in the lending (see the tests), to show that the model checker finds it.
#[cfg(eve_loom)]
static PLANTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

#[cfg(all(test, eve_loom))]
mod tests {
    use std::panic::{AssertUnwindSafe, catch_unwind};
    use std::sync::atomic::Ordering::Relaxed;

    use loom::sync::Arc;
    use loom::thread;

    use super::*;

    /// A value whose every change is counted, with its signal bits derived from the count.
    struct Tally {
        driver: u32,
        others: u32,
    }

    lending_slots!(LENT, LENDER: Tally);

    impl Lent for Tally {
        fn lent() -> &'static Slot<Option<Box<Self>>> {
            &LENT
        }

        fn lender() -> &'static Slot<usize> {
            &LENDER
        }

        fn signals(&self) -> u8 {
            ((self.driver + self.others) % 256) as u8
        }
    }

    /// The driver lends the value and, while it is lent, the body it polls locks it twice; then
    /// it locks it once more with the lending over. A delivery locks it from another thread; an
    /// abort watcher reads the signal bits, then locks it and checks they agreed with the value
    /// as the last holder left it (they may only be older, never ahead).
    fn driver_body_delivery_and_abort_watcher() {
        let tally = Arc::new(Lendable::new(Tally { driver: 0, others: 0 }));
        let delivery = {
            let tally = tally.clone();
            thread::spawn(move || tally.lock().others += 1)
        };
        let watcher = {
            let tally = tally.clone();
            thread::spawn(move || {
                let seen = tally.signals();
                let held = tally.lock();
                let now = held.signals();
                assert!(now >= seen, "the signal bits ran ahead of the value: {seen} then {now}");
            })
        };
        {
            let _lending = tally.lend();
            tally.lock().driver += 1;
            tally.lock().driver += 1;
        }
        tally.lock().driver += 1;
        delivery.join().unwrap();
        watcher.join().unwrap();
        let held = tally.lock();
        assert_eq!((held.driver, held.others), (3, 1), "every change is kept, none twice");
        drop(held);
        assert_eq!(tally.signals(), 4, "the bits are the last holder's");
    }

    /// One test, not two: the planted bug is a static, which tests run side by side would share.
    #[test]
    fn the_lending_holds_under_every_interleaving_and_a_planted_bug_is_found() {
        loom::model(driver_body_delivery_and_abort_watcher);
        PLANTED.store(true, Relaxed);
        let found = catch_unwind(AssertUnwindSafe(|| loom::model(driver_body_delivery_and_abort_watcher)));
        PLANTED.store(false, Relaxed);
        assert!(found.is_err(), "the model checker finds the mutex let go before the value is back");
    }
}
