-- release.lua: free a lease if the caller's token holds it, take the token
-- out of the key's queue of waiters, and announce the key when it is free,
-- naming the live waiter at the head of the queue.
--
-- KEYS[1] lease hash (the fence counter is kept)
-- KEYS[2] queue (zset, arrival order), KEYS[3] queue expiries (zset)
--         (same hash tag as KEYS[1], hence the same cluster slot)
-- ARGV[1] token, ARGV[2] release channel, ARGV[3] original lease key
--
-- Returns 1 when released, 0 when the token does not hold the key. A waiter
-- that gives up (0: it held nothing) still leaves the queue, and if the key
-- is free the key is published so that the next waiter looks again.
--
-- The announcement is the key, followed by a NUL byte and the token of the
-- next waiter when one is queued (keys never contain NUL).

-- Redis 3.2-4.x need effects replication because TIME is not deterministic;
-- from 5.0 on it is the default and this call is a no-op.
if redis.replicate_commands then
  redis.replicate_commands()
end

-- announce publishes the key and the first live waiter, dropping the
-- expired entries ahead of it.
local function announce()
  local t = redis.call('TIME')
  local nowms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local msg = ARGV[3]
  for _ = 1, 64 do
    local h = redis.call('ZRANGE', KEYS[2], 0, 0)
    if not h[1] then
      break
    end
    if tonumber(redis.call('ZSCORE', KEYS[3], h[1]) or '0') > nowms then
      msg = msg .. '\0' .. h[1]
      break
    end
    redis.call('ZREM', KEYS[2], h[1])
    redis.call('ZREM', KEYS[3], h[1])
  end
  redis.call('PUBLISH', ARGV[2], msg)
end

local cur = redis.call('HGET', KEYS[1], 'token')
if cur == ARGV[1] then
  redis.call('DEL', KEYS[1])
  -- The common case, kept to the fewest server calls: nobody is queued
  -- (a granted token has left the queue), so the key alone is announced.
  if redis.call('EXISTS', KEYS[2]) == 0 then
    redis.call('PUBLISH', ARGV[2], ARGV[3])
    return 1
  end
  redis.call('ZREM', KEYS[2], ARGV[1])
  redis.call('ZREM', KEYS[3], ARGV[1])
  announce()
  return 1
end
local dequeued = redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
if dequeued == 1 and not cur then
  announce()
end
return 0
