-- release.lua: free KEYS[1] if ARGV[1] holds it, or, shared (ARGV[4] is
-- '1'), take reader ARGV[1] out of it, and take ARGV[1] out of the queue.
-- If the key is then free (or held by readers, and the head waiter would
-- share), publish the key (ARGV[3]), followed by NUL and the first live
-- waiter if it is exclusive, on ARGV[2], or on ARGV[2] .. ':' .. that
-- waiter's store id when its store listens: only that waiter may take the
-- key, so only its store's clients wake.
-- KEYS: lease, queue, queue expiries, queue channels, readers, their
-- holders (see acquire.lua).
-- Returns 1 when released, 0 when ARGV[1] did not hold the key.
local now -- the server's ms, read once needed: a free key needs none
local function clocked()
  now = now or select(2, clock())
  return now
end
local lease = redis.call('GET', KEYS[1])
if lease then
  decode(lease)
end
local readers = lease and string.byte(lease) == 0
local mine, m = false, ARGV[1]
if ARGV[4] == '1' then
  m = '\0' .. ARGV[1]
  mine = readers and (tonumber(redis.call('ZSCORE', KEYS[5], ARGV[1])) or 0) > clocked()
  if mine then
    redis.call('ZREM', KEYS[5], ARGV[1])
    redis.call('HDEL', KEYS[6], ARGV[1])
    lease = reseat(KEYS[1], KEYS[5], KEYS[6], string.match(lease, '^%z(%d+)%z'), clocked()) and lease
  end
elseif lease and string.sub(lease, 1, #ARGV[1] + 1) == ARGV[1] .. '\0' then
  mine, lease = true, false
  redis.call('DEL', KEYS[1])
end
local left, head = false, nil
if redis.call('EXISTS', KEYS[2]) == 1 then
  left = redis.call('ZREM', KEYS[2], m) == 1
  redis.call('ZREM', KEYS[3], m)
  redis.call('HDEL', KEYS[4], m)
  for _, w in ipairs(redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', clocked())) do
    redis.call('ZREM', KEYS[2], w)
    redis.call('ZREM', KEYS[3], w)
    redis.call('HDEL', KEYS[4], w)
  end
  head = redis.call('ZRANGE', KEYS[2], 0, 0)[1]
end
local res = mine and 1 or 0
local exclusive = head and string.byte(head) ~= 0
if not (mine or left) or lease and not (readers and head and not exclusive) then
  return res
end
announce(KEYS[4], head, ARGV[2], ARGV[3])
return res
