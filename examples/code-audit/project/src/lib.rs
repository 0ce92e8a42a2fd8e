//! A small inventory library, used as the code base the example agent audits.

pub mod store;

/// An item in stock.
pub struct Item {
    pub sku: String,
    pub quantity: u32,
    pub price_cents: u64,
}

/// Total value of the stock, in cents.
pub fn stock_value(items: &[Item]) -> u64 {
    // TODO: this overflows for very large inventories; use checked_mul.
    items.iter().map(|i| i.quantity as u64 * i.price_cents).sum()
}
