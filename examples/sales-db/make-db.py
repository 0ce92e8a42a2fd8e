"""Builds data/sales.db, the file the sales-db agent queries.

Deterministic (a fixed seed): running it again makes the same rows. The
committed file was made with `python3 make-db.py`.
"""
import random
import sqlite3
from pathlib import Path

random.seed(2026)
path = Path(__file__).parent / "data" / "sales.db"
path.unlink(missing_ok=True)
db = sqlite3.connect(path)
db.executescript(
    """
    CREATE TABLE regions (
        id INTEGER PRIMARY KEY,
        name TEXT NOT NULL UNIQUE
    );
    CREATE TABLE products (
        id INTEGER PRIMARY KEY,
        name TEXT NOT NULL UNIQUE,
        unit_price_cents INTEGER NOT NULL
    );
    CREATE TABLE orders (
        id INTEGER PRIMARY KEY,
        day TEXT NOT NULL,              -- YYYY-MM-DD
        region_id INTEGER NOT NULL REFERENCES regions(id),
        product_id INTEGER NOT NULL REFERENCES products(id),
        units INTEGER NOT NULL CHECK (units > 0),
        discount_pct INTEGER NOT NULL DEFAULT 0
    );
    CREATE INDEX orders_day ON orders(day);
    CREATE VIEW order_revenue AS
        SELECT o.id, o.day, r.name AS region, p.name AS product, o.units,
               o.units * p.unit_price_cents * (100 - o.discount_pct) / 100 AS revenue_cents
        FROM orders o JOIN regions r ON r.id = o.region_id JOIN products p ON p.id = o.product_id;
    """
)
regions = ["North", "South", "East", "West"]
products = [("Widget", 1250), ("Gadget", 4999), ("Gizmo", 899), ("Doohickey", 2450)]
db.executemany("INSERT INTO regions(name) VALUES (?)", [(r,) for r in regions])
db.executemany("INSERT INTO products(name, unit_price_cents) VALUES (?, ?)", products)
weight = {1: 1.0, 2: 0.8, 3: 1.15, 4: 0.95}
orders = []
for month in range(1, 13):
    for _ in range(50):
        region = random.randint(1, 4)
        orders.append(
            (
                f"2026-{month:02d}-{random.randint(1, 28):02d}",
                region,
                random.randint(1, 4),
                max(1, int(random.randint(1, 40) * weight[region])),
                random.choice([0, 0, 0, 5, 10]),
            )
        )
db.executemany(
    "INSERT INTO orders(day, region_id, product_id, units, discount_pct) VALUES (?, ?, ?, ?, ?)",
    orders,
)
db.commit()
db.execute("VACUUM")
db.close()
print(path, path.stat().st_size, "bytes")
