-- protab demo: a synthetic census-like population, generated in SQL.
--
--   .read sql/demo_population.sql
--   CREATE TABLE persons AS SELECT * FROM protab_demo_population(1000000);
--
-- Deterministic: every random draw is a hash of (person or household id, draw number), so the
-- same n gives the same rows on every run and thread count. Columns:
--   pid           person identifier (1 … n)
--   hid           household identifier (persons of one household live together)
--   region        "R1" … "R8"
--   municipality  region code + 3 digits, e.g. "R3017" (400 municipalities of skewed size)
--   grid1km       INSPIRE-style 1 km grid square, e.g. "1kmN2684E4334"
--   grid10km      its 10 km parent, e.g. "10kmN268E433"
--   age           0 … 99;  agegroup "00-04" … "85+"
--   sex           "F" or "M"
--   weight        a survey-like weight around 1
--   income        yearly income (0 below age 16)

CREATE OR REPLACE MACRO protab_demo_u(id, k) AS
    -- uniform on (0, 1) from a hash of (id, draw number k)
    (CAST(hash(CAST(id AS BIGINT) * 64 + k) >> 11 AS DOUBLE) + 0.5) / 9007199254740992.0;

CREATE OR REPLACE MACRO protab_demo_z(id, k) AS
    -- standard normal by Box–Muller from two uniforms
    sqrt(-2 * ln(protab_demo_u(id, k))) * cos(2 * pi() * protab_demo_u(id, k + 1));

CREATE OR REPLACE MACRO protab_demo_population(n) AS TABLE
WITH persons AS (
    SELECT range + 1 AS pid, (range * 5) // 12 + 1 AS hid FROM range(n)
),
households AS (
    SELECT pid, hid,
           -- municipality by size rank: low ranks are large towns
           CAST(floor(400 * pow(protab_demo_u(hid, 1), 2.2)) AS INTEGER) AS rank
    FROM persons
),
placed AS (
    SELECT pid, hid, rank,
           rank % 8 AS r,
           -- the municipality centre, inside its region's 400 km x 150 km box
           2700 + (rank % 8) // 4 * 400 + 20 + floor(360 * protab_demo_u(rank + 1000000000, 3)) AS cn,
           4000 + (rank % 8) % 4 * 150 + 10 + floor(130 * protab_demo_u(rank + 1000000000, 5)) AS ce,
           1.5 + 12.0 * rank / 400 AS spread
    FROM households
),
located AS (
    SELECT pid, hid, rank, r,
           CAST(least(greatest(floor(cn + spread * protab_demo_z(hid, 7)), 2700 + r // 4 * 400),
                      2700 + r // 4 * 400 + 399) AS INTEGER) AS north,
           CAST(least(greatest(floor(ce + spread * protab_demo_z(hid, 9)), 4000 + r % 4 * 150),
                      4000 + r % 4 * 150 + 149) AS INTEGER) AS east
    FROM placed
),
people AS (
    SELECT l.*,
           CAST(least(99, floor(88 * pow(protab_demo_u(pid, 11), 1.15) + 12 * protab_demo_u(pid, 12)))
                AS INTEGER) AS age,
           CASE WHEN protab_demo_u(pid, 13) < 0.51 THEN 'F' ELSE 'M' END AS sex
    FROM located l
)
SELECT
    pid,
    hid,
    'R' || CAST(r + 1 AS VARCHAR) AS region,
    'R' || CAST(r + 1 AS VARCHAR) || lpad(CAST(rank // 8 + 1 AS VARCHAR), 3, '0') AS municipality,
    '1kmN' || CAST(north AS VARCHAR) || 'E' || CAST(east AS VARCHAR) AS grid1km,
    '10kmN' || CAST(north // 10 AS VARCHAR) || 'E' || CAST(east // 10 AS VARCHAR) AS grid10km,
    age,
    CASE WHEN age >= 85 THEN '85+'
         ELSE lpad(CAST(age // 5 * 5 AS VARCHAR), 2, '0') || '-'
              || lpad(CAST(age // 5 * 5 + 4 AS VARCHAR), 2, '0') END AS agegroup,
    sex,
    round(0.8 + 0.4 * protab_demo_u(pid, 15), 4) AS weight,
    CASE WHEN age < 16 THEN 0.0
         ELSE round(exp(10.1 + 0.6 * protab_demo_z(pid, 17)), 0) END AS income
FROM people;
