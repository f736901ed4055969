//! The resources of one kind that one guest instance holds, by handle.
//!
//! Each Spin interface keeps its own table (as Spin's factors do) instead of sharing the
//! instance's WASI `ResourceTable`: the interface's host code then needs nothing of the
//! instance but its own view. The generated bindings name a resource by a placeholder
//! type; the handle a guest holds is the `rep` of that resource, an index here.

use wasmtime::component::Resource;

/// A table of `T` with a cap on how many are open at once.
pub struct Handles<T> {
    slots: Vec<Option<T>>,
    free: Vec<u32>,
    open: usize,
    max_open: usize,
}

/// The instance already holds as many as it may.
#[derive(Debug)]
pub struct TableFull;

impl<T> Handles<T> {
    pub const fn new(max_open: usize) -> Handles<T> {
        Handles {
            slots: Vec::new(),
            free: Vec::new(),
            open: 0,
            max_open,
        }
    }

    /// The instance holds as many as it may.
    pub fn is_full(&self) -> bool {
        self.open >= self.max_open
    }

    /// Adds `value` and returns the owned handle the guest gets for it.
    pub fn push<R: 'static>(&mut self, value: T) -> Result<Resource<R>, TableFull> {
        if self.is_full() {
            return Err(TableFull);
        }
        let rep = match self.free.pop() {
            Some(rep) => {
                self.slots[rep as usize] = Some(value);
                rep
            }
            None => {
                let rep = u32::try_from(self.slots.len()).map_err(|_| TableFull)?;
                self.slots.push(Some(value));
                rep
            }
        };
        self.open += 1;
        Ok(Resource::new_own(rep))
    }

    pub fn get<R: 'static>(&self, handle: &Resource<R>) -> wasmtime::Result<&T> {
        self.slots
            .get(handle.rep() as usize)
            .and_then(Option::as_ref)
            .ok_or_else(|| unknown(handle))
    }

    pub fn get_mut<R: 'static>(&mut self, handle: &Resource<R>) -> wasmtime::Result<&mut T> {
        self.slots
            .get_mut(handle.rep() as usize)
            .and_then(Option::as_mut)
            .ok_or_else(|| unknown(handle))
    }

    /// Takes the value out when the guest drops its handle.
    pub fn remove<R: 'static>(&mut self, handle: Resource<R>) -> wasmtime::Result<T> {
        let value = self
            .slots
            .get_mut(handle.rep() as usize)
            .and_then(Option::take)
            .ok_or_else(|| unknown(&handle))?;
        self.free.push(handle.rep());
        self.open -= 1;
        Ok(value)
    }
}

/// A handle that names nothing: wasmtime hands the host only handles it issued, so this
/// is a host bug, and it traps.
fn unknown<R: 'static>(handle: &Resource<R>) -> wasmtime::Error {
    wasmtime::format_err!("unknown {} handle {}", short_type_name::<R>(), handle.rep())
}

fn short_type_name<R>() -> &'static str {
    let name = std::any::type_name::<R>();
    name.rsplit("::").next().unwrap_or(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Conn;

    #[test]
    fn handles_are_reused_after_a_drop_and_capped() {
        let mut table: Handles<&str> = Handles::new(2);
        let a: Resource<Conn> = table.push("a").unwrap();
        let b: Resource<Conn> = table.push("b").unwrap();
        assert!(table.push::<Conn>("c").is_err(), "over the cap");
        assert_eq!(*table.get(&b).unwrap(), "b");
        let a_rep = a.rep();
        assert_eq!(table.remove(a).unwrap(), "a");
        assert!(table.get(&Resource::<Conn>::new_borrow(a_rep)).is_err());
        let c: Resource<Conn> = table.push("c").unwrap();
        assert_eq!(c.rep(), a_rep, "a freed slot is reused");
        *table.get_mut(&c).unwrap() = "c2";
        assert_eq!(*table.get(&c).unwrap(), "c2");
    }

    #[test]
    fn an_unknown_handle_is_an_error_not_a_panic() {
        let mut table: Handles<u8> = Handles::new(4);
        let stray = Resource::<Conn>::new_own(7);
        let error = table.remove(stray).unwrap_err().to_string();
        assert!(error.contains("unknown Conn handle 7"), "{error}");
    }
}
