use std::collections::HashMap;

use crate::Item;

/// Items by SKU.
pub struct Store {
    items: HashMap<String, Item>,
}

impl Store {
    pub fn new() -> Self {
        Store { items: HashMap::new() }
    }

    pub fn add(&mut self, item: Item) {
        // FIXME: silently replaces an existing item with the same SKU.
        self.items.insert(item.sku.clone(), item);
    }

    pub fn take(&mut self, sku: &str, n: u32) -> u32 {
        let item = self.items.get_mut(sku).unwrap(); // TODO: unknown SKU panics
        item.quantity -= n; // TODO: underflow when n > quantity
        item.quantity
    }
}
