-- release.lua: free a lease if the caller's token holds it, take the token
-- out of the key's queue of waiters, and announce the key when it is free.
--
-- KEYS[1] lease hash (the fence counter is kept)
-- KEYS[2] queue (zset, arrival order), KEYS[3] queue expiries (zset)
--         (same hash tag as KEYS[1], hence the same cluster slot)
-- ARGV[1] token, ARGV[2] release channel, ARGV[3] original lease key
--
-- Returns 1 when released, 0 when the token does not hold the key. A waiter
-- that gives up (0: it held nothing) still leaves the queue, and if the key
-- is free the key is published so that the next waiter looks again.

local dequeued = redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
local cur = redis.call('HGET', KEYS[1], 'token')
if cur == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH', ARGV[2], ARGV[3])
  return 1
end
if dequeued == 1 and not cur then
  redis.call('PUBLISH', ARGV[2], ARGV[3])
end
return 0
